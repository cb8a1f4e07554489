# libtrack: top-level build.
#
#   make            library and tools (host)
#   make check      every test: host unit and shell tests, then the VM tests
#   make demo       boot the patched kernel in QEMU and run the main jobs
#   make kernel     the patched test kernel (cached outside the repo)
#   make initramfs  the VM's initramfs (tools, selftests, module, dmsetup),
#                   and one for Debian's stock kernel (dm-track from DKMS)
#   make bench      benchmarks; results go to docs/benchmarks.md
#   make fuzz       run the fuzz targets (FUZZ_MINUTES=N each, default 1)
#   make install    PREFIX=/usr/local DESTDIR=
#
# Everything is built under build/; the kernel under $(LIBTRACK_CACHE).

# 2.0: the ABI that is kept stable (see docs/abi.md); 1.0 was never
# released with this soname promise.
VERSION		:= 2.0.0
SOVERSION	:= 2

PREFIX		?= /usr/local
BINDIR		?= $(PREFIX)/bin
LIBDIR		?= $(PREFIX)/lib
INCLUDEDIR	?= $(PREFIX)/include
MANDIR		?= $(PREFIX)/share/man
PKGCONFIGDIR	?= $(LIBDIR)/pkgconfig
DOCDIR		?= $(PREFIX)/share/doc/libtrack
DESTDIR		?=

LIBTRACK_CACHE	?= $(HOME)/.cache/libtrack
export LIBTRACK_CACHE

B		:= build
CC		?= cc
AR		?= ar
PKG_CONFIG	?= pkg-config
CFLAGS		?= -O2 -g
WARNFLAGS	:= -std=c11 -Wall -Wextra -Werror -Wshadow -Wformat=2 \
		   -Wmissing-prototypes -Wstrict-prototypes -Wno-unused-parameter
BASEFLAGS	:= -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Ilibtrack/include \
		   $(WARNFLAGS)

# Two libraries: libtrack (watch, stream, batch, extents; zlib, liburing)
# and libtrack-dm (track_dm_*: libdevmapper and libmnl). A client that only
# watches files or reads streams never loads the device-mapper stack.
CORE_PKGS	:= zlib liburing
DM_PKGS		:= libmnl devmapper
DEP_PKGS	:= $(DM_PKGS) $(CORE_PKGS)
CORE_CFLAGS	 = $(shell $(PKG_CONFIG) --cflags $(CORE_PKGS))
CORE_LIBS	 = $(shell $(PKG_CONFIG) --libs $(CORE_PKGS))
DEP_CFLAGS	 = $(shell $(PKG_CONFIG) --cflags $(DEP_PKGS))
DEP_LIBS	 = $(shell $(PKG_CONFIG) --libs $(DEP_PKGS))

DM_SRCS		:= $(sort $(wildcard libtrack/src/dm*.c))
LIB_SRCS	:= $(filter-out $(DM_SRCS),$(sort $(wildcard libtrack/src/*.c)))
LIB_OBJS	:= $(LIB_SRCS:libtrack/src/%.c=$(B)/libtrack/%.o)
DM_OBJS		:= $(DM_SRCS:libtrack/src/%.c=$(B)/libtrack/%.o)
LIB_HDRS	:= $(wildcard libtrack/include/*.h libtrack/include/libtrack/*.h)
LIB_SO		:= $(B)/lib/libtrack.so.$(VERSION)
LIB_A		:= $(B)/lib/libtrack.a
DM_SO		:= $(B)/lib/libtrack-dm.so.$(VERSION)
DM_A		:= $(B)/lib/libtrack-dm.a
# What the tools and tests link: both libraries, statically.
ALL_A		:= $(DM_A) $(LIB_A)

TOOL_SRCS	:= $(sort $(wildcard tools/*.c))
TOOL_UTIL_SRCS	:= $(sort $(wildcard tools/util/*.c))
TOOL_UTIL_OBJS	:= $(TOOL_UTIL_SRCS:tools/util/%.c=$(B)/tools/util/%.o)
# An archive, so that a tool links only the helpers it calls: one that
# never touches a dm device (dmmerge, uds-plus) then does not load
# libdevmapper and its libraries (-Wl,--as-needed) when it starts.
TOOL_UTIL_A	:= $(B)/tools/util/libtoolutil.a
TOOLS		:= $(TOOL_SRCS:tools/%.c=$(B)/bin/%)

TEST_SRCS	:= $(sort $(wildcard tests/test_*.c))
TESTS		:= $(TEST_SRCS:tests/%.c=$(B)/tests/%) \
		   $(B)/tests/test_stream_sanitized
EXAMPLE_SRCS	:= $(sort $(wildcard examples/*.c))
EXAMPLES	:= $(EXAMPLE_SRCS:examples/%.c=$(B)/examples/%)

# scripts/deps.sh installs (as root) or names (otherwise) the packages of
# one group: build (library and tools), test (host tests), vm (kernel,
# QEMU, initramfs). Each group is checked once per build directory.
DEPS_STAMP	:= $(B)/.deps-build
DEPS_TEST	:= $(B)/.deps-test
DEPS_VM		:= $(B)/.deps-vm

.PHONY: all lib tools tests examples deps kernel module selftests initramfs \
	check check-host check-vm demo bench install uninstall clean \
	dm-track-patch fuzz fuzzers

all: lib tools

$(B)/.deps-%: scripts/deps.sh
	@scripts/deps.sh $*
	@if [ $* = build ]; then for p in zlib:zlib1g-dev libmnl:libmnl-dev \
		devmapper:libdevmapper-dev; do \
		$(PKG_CONFIG) --exists $${p%%:*} || { \
		echo "$(PKG_CONFIG) cannot find $${p%%:*}.pc:" \
		     "install $${p#*:} (or set PKG_CONFIG_PATH)" >&2; \
		exit 1; }; done; fi
	@mkdir -p $(@D) && touch $@

deps: $(DEPS_STAMP) $(DEPS_TEST) $(DEPS_VM)

lib: $(DEPS_STAMP) $(LIB_SO) $(LIB_A) $(DM_SO) $(DM_A)

tools: $(DEPS_STAMP) $(TOOLS)

tests: $(DEPS_STAMP) $(DEPS_TEST) $(TESTS) fuzzers

examples: $(EXAMPLES)

# --- the library ---------------------------------------------------------

# dm-track's uapi header (<linux/dm-track.h>) is used from its source.
$(B)/libtrack/%.o: libtrack/src/%.c $(LIB_HDRS) libtrack/src/*.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CORE_CFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden \
		-c -o $@ $<

# dm-track's uapi header (<linux/dm-track.h>) is used from its source.
$(DM_OBJS): $(B)/libtrack/%.o: libtrack/src/%.c $(LIB_HDRS) libtrack/src/*.h \
		dm-track/include/uapi/linux/dm-track.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -Idm-track/include/uapi $(DEP_CFLAGS) $(CFLAGS) \
		-fPIC -fvisibility=hidden \
		-c -o $@ $<

$(LIB_SO): $(LIB_OBJS) libtrack/libtrack.map
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -o $@ $(LIB_OBJS) \
		-Wl,-soname,libtrack.so.$(SOVERSION) \
		-Wl,--version-script=libtrack/libtrack.map -Wl,-z,defs \
		$(LDFLAGS) -Wl,--as-needed $(CORE_LIBS)
	ln -sf libtrack.so.$(VERSION) $(B)/lib/libtrack.so.$(SOVERSION)
	ln -sf libtrack.so.$(SOVERSION) $(B)/lib/libtrack.so

$(DM_SO): $(DM_OBJS) libtrack/libtrack-dm.map $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -o $@ $(DM_OBJS) \
		-Wl,-soname,libtrack-dm.so.$(SOVERSION) \
		-Wl,--version-script=libtrack/libtrack-dm.map -Wl,-z,defs \
		$(LDFLAGS) -Wl,--as-needed -L$(B)/lib -ltrack $(DEP_LIBS)
	ln -sf libtrack-dm.so.$(VERSION) $(B)/lib/libtrack-dm.so.$(SOVERSION)
	ln -sf libtrack-dm.so.$(SOVERSION) $(B)/lib/libtrack-dm.so

$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(DM_A): $(DM_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# --- tools: each tools/NAME.c is one program, linked with libtrack.a ------

$(B)/tools/util/%.o: tools/util/%.c tools/util/*.h $(LIB_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -Itools/util $(CFLAGS) -c -o $@ $<

$(TOOL_UTIL_A): $(TOOL_UTIL_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

$(B)/bin/%: tools/%.c $(ALL_A) $(TOOL_UTIL_A) $(wildcard tools/util/*.h)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -Itools/util $(CFLAGS) -o $@ $< $(TOOL_UTIL_A) \
		$(ALL_A) $(LDFLAGS) -Wl,--as-needed $(DEP_LIBS)

# --- host unit tests (cmocka) --------------------------------------------

$(B)/tests/%: tests/%.c $(ALL_A) $(wildcard tests/*.h) | $(DEPS_STAMP) $(DEPS_TEST)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -Ilibtrack/src -Itests $(CFLAGS) -o $@ $< \
		$(shell sed -n 's,^/\* wrap: \(.*\) \*/$$,\1,p' $<) \
		$(ALL_A) $(LDFLAGS) $(DEP_LIBS) -lcmocka

# Examples link only what their area needs: dm-*.c libtrack-dm, the others
# libtrack alone (tests/installed_clients.sh builds them with pkg-config).
$(B)/examples/dm-%: examples/dm-%.c $(ALL_A)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(ALL_A) $(DEP_LIBS)

$(B)/examples/%: examples/%.c $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(CFLAGS) -o $@ $< $(LIB_A) $(CORE_LIBS)

# --- sanitizers and fuzzing (clang) --------------------------------------
# The stream test again, built with ASan and UBSan (no recovery: any report
# fails it); and libFuzzer targets, built with -DTRACK_FUZZ_NO_CRC so that
# the checksums do not hide the parser from the fuzzer.

SAN_CC		?= clang
SANFLAGS	:= -O1 -g -fno-omit-frame-pointer \
		   -fsanitize=address,undefined -fno-sanitize-recover=all
SAN_OBJS	:= $(LIB_SRCS:libtrack/src/%.c=$(B)/san/libtrack/%.o) \
		   $(DM_SRCS:libtrack/src/%.c=$(B)/san/libtrack/%.o)
FUZZ_LIB_OBJS	:= $(LIB_SRCS:libtrack/src/%.c=$(B)/fuzz/libtrack/%.o) \
		   $(DM_SRCS:libtrack/src/%.c=$(B)/fuzz/libtrack/%.o)
FUZZ_UTIL_OBJS	:= $(TOOL_UTIL_SRCS:tools/util/%.c=$(B)/fuzz/util/%.o)
FUZZERS		:= $(B)/fuzz/fuzz_stream_read $(B)/fuzz/fuzz_dmmerge \
		   $(B)/fuzz/fuzz_watch_parse $(B)/fuzz/fuzz_dm_status
FUZZ_MINUTES	?= 1

$(B)/san/libtrack/%.o: libtrack/src/%.c $(LIB_HDRS) libtrack/src/*.h \
		dm-track/include/uapi/linux/dm-track.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(SAN_CC) $(BASEFLAGS) -Idm-track/include/uapi $(DEP_CFLAGS) \
		$(SANFLAGS) -c -o $@ $<

$(B)/tests/test_stream_sanitized: tests/test_stream.c $(SAN_OBJS)
	@mkdir -p $(@D)
	$(SAN_CC) $(BASEFLAGS) -Ilibtrack/src -Itests $(SANFLAGS) \
		-DTEST_SANITIZED -o $@ $< \
		$(SAN_OBJS) $(DEP_LIBS) -lcmocka

$(B)/fuzz/libtrack/%.o: libtrack/src/%.c $(LIB_HDRS) libtrack/src/*.h \
		dm-track/include/uapi/linux/dm-track.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(SAN_CC) $(BASEFLAGS) -Idm-track/include/uapi $(DEP_CFLAGS) \
		$(SANFLAGS) -fsanitize=fuzzer-no-link -DTRACK_FUZZ_NO_CRC \
		-c -o $@ $<

$(B)/fuzz/util/%.o: tools/util/%.c tools/util/*.h $(LIB_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(SAN_CC) $(BASEFLAGS) -Itools/util $(SANFLAGS) \
		-fsanitize=fuzzer-no-link -c -o $@ $<

$(B)/fuzz/fuzz_stream_read: fuzz/fuzz_stream_read.c $(FUZZ_LIB_OBJS)
	$(SAN_CC) $(BASEFLAGS) $(SANFLAGS) -fsanitize=fuzzer -o $@ $< \
		$(FUZZ_LIB_OBJS) $(DEP_LIBS)

$(B)/fuzz/fuzz_watch_parse: fuzz/fuzz_watch_parse.c $(FUZZ_LIB_OBJS)
	$(SAN_CC) $(BASEFLAGS) $(SANFLAGS) -fsanitize=fuzzer -o $@ $< \
		$(FUZZ_LIB_OBJS) $(DEP_LIBS)

# The status parser is internal to libtrack-dm: built with its header.
$(B)/fuzz/fuzz_dm_status: fuzz/fuzz_dm_status.c $(FUZZ_LIB_OBJS)
	$(SAN_CC) $(BASEFLAGS) -Ilibtrack/src $(SANFLAGS) -fsanitize=fuzzer \
		-o $@ $< $(FUZZ_LIB_OBJS) $(DEP_LIBS)

# dmmerge as it ships, its main() renamed so the fuzzer can call it
$(B)/fuzz/fuzz_dmmerge: fuzz/fuzz_dmmerge.c tools/dmmerge.c $(FUZZ_LIB_OBJS) \
		$(FUZZ_UTIL_OBJS)
	$(SAN_CC) $(BASEFLAGS) -Itools/util $(SANFLAGS) -fsanitize=fuzzer \
		-Dmain=dmmerge_main -Wno-missing-prototypes -o $@ \
		fuzz/fuzz_dmmerge.c tools/dmmerge.c $(FUZZ_UTIL_OBJS) \
		$(FUZZ_LIB_OBJS) $(DEP_LIBS)

fuzzers: $(FUZZERS)

# make fuzz [FUZZ_MINUTES=N]: each target for N minutes, corpus kept in
# build/fuzz/corpus/, crashes in build/fuzz/artifacts/.
fuzz: all fuzzers
	fuzz/run.sh $(FUZZ_MINUTES)

# --- kernel, module, selftests, initramfs (for the VM) --------------------

kernel: $(DEPS_STAMP) $(DEPS_VM)
	scripts/kernel.sh

module: kernel
	scripts/module.sh

selftests: kernel all
	scripts/selftests.sh

initramfs: module selftests all
	scripts/initramfs.sh
	scripts/stock-kernel.sh

dm-track-patch:
	scripts/gen-dm-track-patch.sh

# --- tests and demo -------------------------------------------------------

check: all tests examples $(DEPS_VM)
	scripts/check.sh

check-host: all tests examples
	scripts/check.sh --host-only

check-vm: all $(DEPS_VM)
	scripts/check.sh --vm-only

demo: initramfs
	scripts/vm-run.sh --demo

bench: all initramfs
	bench/run.sh

# --- install --------------------------------------------------------------

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/libtrack \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BINDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man8
	install -m 644 $(LIB_A) $(DM_A) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(LIB_SO) $(DM_SO) $(DESTDIR)$(LIBDIR)/
	for l in libtrack libtrack-dm; do \
		ln -sf $$l.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$$l.so.$(SOVERSION); \
		ln -sf $$l.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/$$l.so; done
	install -m 644 libtrack/include/libtrack.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 libtrack/include/libtrack/*.h \
		$(DESTDIR)$(INCLUDEDIR)/libtrack/
	sed -e 's,@PREFIX@,$(PREFIX),' -e 's,@LIBDIR@,$(LIBDIR),' \
	    -e 's,@INCLUDEDIR@,$(INCLUDEDIR),' -e 's,@VERSION@,$(VERSION),' \
	    -e 's,@REQUIRES_PRIVATE@,$(CORE_PKGS),' -e 's,@LIBS_PRIVATE@,-lpthread,' \
	    libtrack/libtrack.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/libtrack.pc
	sed -e 's,@PREFIX@,$(PREFIX),' -e 's,@LIBDIR@,$(LIBDIR),' \
	    -e 's,@INCLUDEDIR@,$(INCLUDEDIR),' -e 's,@VERSION@,$(VERSION),' \
	    -e 's,@REQUIRES_PRIVATE@,$(DM_PKGS),' \
	    libtrack/libtrack-dm.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/libtrack-dm.pc
	install -m 755 $(TOOLS) $(DESTDIR)$(BINDIR)/
	install -m 644 libtrack/man/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -d $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(DOCDIR)/examples
	install -m 644 libtrack/man/*.7 $(DESTDIR)$(MANDIR)/man7/
	install -m 644 docs/stream-format.md $(DESTDIR)$(DOCDIR)/
	install -m 644 examples/*.c $(DESTDIR)$(DOCDIR)/examples/
	for m in tools/man/*.[178]; do [ -f "$$m" ] || continue; \
		install -m 644 "$$m" $(DESTDIR)$(MANDIR)/man$${m##*.}/; done

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libtrack.* $(DESTDIR)$(LIBDIR)/libtrack-dm.* \
		$(DESTDIR)$(PKGCONFIGDIR)/libtrack.pc \
		$(DESTDIR)$(PKGCONFIGDIR)/libtrack-dm.pc
	rm -rf $(DESTDIR)$(INCLUDEDIR)/libtrack $(DESTDIR)$(INCLUDEDIR)/libtrack.h
	for t in $(notdir $(TOOLS)); do rm -f $(DESTDIR)$(BINDIR)/$$t \
		$(DESTDIR)$(MANDIR)/man[178]/$$t.[178]; done
	for m in libtrack/man/*.3; do \
		rm -f $(DESTDIR)$(MANDIR)/man3/$$(basename $$m); done
	rm -f $(DESTDIR)$(MANDIR)/man7/libtrack.7
	rm -rf $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR)/stream-format.md

clean:
	rm -rf $(B)
	if [ -f dm-track/Makefile ]; then $(MAKE) -C dm-track clean-local; fi

# --- uds-plus: its sync engine lives in tools/uds/ ------------------------
# Linked into uds-plus and into the tests/test_uds_*.c unit tests only.

UDS_SRCS	:= $(sort $(wildcard tools/uds/*.c))
UDS_OBJS	:= $(UDS_SRCS:tools/uds/%.c=$(B)/tools/uds/%.o)

$(B)/tools/uds/%.o: tools/uds/%.c tools/uds/*.h $(LIB_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -Itools/uds -Itools/util $(CFLAGS) -c -o $@ $<

$(B)/bin/uds-plus: tools/uds-plus.c $(UDS_OBJS) $(ALL_A) $(TOOL_UTIL_A)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -Itools/uds -Itools/util $(CFLAGS) -o $@ $< \
		$(UDS_OBJS) $(TOOL_UTIL_A) $(ALL_A) $(LDFLAGS) \
		-Wl,--as-needed $(DEP_LIBS)

$(B)/tests/test_uds_%: tests/test_uds_%.c $(UDS_OBJS) $(ALL_A) | $(DEPS_STAMP) $(DEPS_TEST)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -Ilibtrack/src -Itests -Itools/uds $(CFLAGS) -o $@ $< \
		$(shell sed -n 's,^/\* wrap: \(.*\) \*/$$,\1,p' $<) \
		$(UDS_OBJS) $(ALL_A) $(LDFLAGS) $(DEP_LIBS) -lcmocka

# The systemd user unit of uds-plus (not part of `install`: not every
# system runs systemd).
SYSTEMD_USER_DIR ?= $(PREFIX)/lib/systemd/user

.PHONY: install-systemd
install-systemd:
	install -d $(DESTDIR)$(SYSTEMD_USER_DIR) $(DESTDIR)$(PREFIX)/share/doc/libtrack
	sed 's,@BINDIR@,$(BINDIR),' tools/systemd/uds-plus@.service \
		>$(DESTDIR)$(SYSTEMD_USER_DIR)/uds-plus@.service
	install -m 644 tools/systemd/uds-plus.conf.example \
		$(DESTDIR)$(PREFIX)/share/doc/libtrack/

# The block-list example is tested as it is shipped.
$(B)/tests/test_blocklist: examples/blocklist.c
