# Helpers for the dsync host tests (sourced after lib.sh).
#
#   need_tools                  skip unless dmextract, dmmerge, python3 exist
#   mkimg FILE MIB              FILE of MIB MiB of random data
#   scribble FILE N SEED [BS]   change N random blocks of FILE (a third of
#                               them to zeros), print them as a dirty list
#   stream_tool ARGS...         tests/dsync_stream.py
#   run_status CMD...           run CMD, stderr to $TMP/err; sets $status
#   same_outside FILE A B STREAM  FILE and A agree outside the blocks B of
#                               the stream STREAM touches, and FILE is
#                               either A or B inside each of them

# The system python: a version manager's shim costs half a second a call.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

need_tools() {
	for t in dmextract dmmerge; do
		[ -x "$BUILD/bin/$t" ] || skip_all "build/bin/$t is not built"
	done
	command -v $PY >/dev/null || skip_all "python3 is missing"
}

mkimg() {
	head -c "$(($2 * 1024 * 1024))" /dev/urandom >"$1"
}

scribble() {
	$PY - "$1" "$2" "$3" "${4:-4096}" <<'PY'
import os, random, sys
path, n, seed, bs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed)
size = os.path.getsize(path)
nblocks = (size + bs - 1) // bs
blocks = sorted(rnd.sample(range(nblocks), min(n, nblocks)))
with open(path, "r+b") as f:
    for b in blocks:
        f.seek(b * bs)
        f.write(bytes(bs) if b % 3 == 0 else rnd.randbytes(bs))
    f.truncate(size)
print("\n".join(map(str, blocks)))
PY
}

stream_tool() {
	$PY "$TOP/tests/dsync_stream.py" "$@"
}

run_status() {
	"$@" 2>"$TMP/err"
	status=$?
}

# same_outside FILE OLD NEW STREAM: every block of FILE equals OLD, except
# blocks inside records of STREAM, which equal OLD or NEW.
same_outside() {
	$PY - "$@" <<'PY'
import os, struct, sys
sys.path.insert(0, os.environ["TOP"] + "/tests")
import dsync_stream as ds
path, old, new, stream = sys.argv[1:5]
a, o, n = (open(p, "rb").read() for p in (path, old, new))
s = open(stream, "rb").read()
bs = ds.get(s, 24, "<I")
if len(a) != len(o):
    sys.exit("size changed: %d, was %d" % (len(a), len(o)))
inside = set()
for r in ds.records(s):
    if r[1] in (ds.T_DATA, ds.T_ZERO) and r[3] < 1 << 32:
        inside.update(range(r[2], min(r[2] + r[3], (len(a) + bs - 1) // bs)))
for b in range((len(a) + bs - 1) // bs):
    x = a[b * bs:(b + 1) * bs]
    if x == o[b * bs:(b + 1) * bs]:
        continue
    if b in inside and x == n[b * bs:(b + 1) * bs]:
        continue
    sys.exit("block %d is neither old nor new%s" %
             (b, "" if b in inside else " (outside the stream)"))
PY
}
export TOP

# prefix_applied FILE OLD NEW STREAM K: the blocks of records 0 .. K-1 of
# STREAM are as in NEW, every other block of FILE is as in OLD (so records
# from K on were not written, and nothing outside the stream was touched).
prefix_applied() {
	$PY - "$@" <<'PY'
import os, sys
sys.path.insert(0, os.environ["TOP"] + "/tests")
import dsync_stream as ds
path, old, new, stream, k = sys.argv[1:6]
k = int(k)
a, o, n = (open(p, "rb").read() for p in (path, old, new))
if k == 0:
    sys.exit(0 if a == o else "the target was changed")
s = open(stream, "rb").read()
bs = ds.get(s, 24, "<I")
if len(a) != len(o):
    sys.exit("size changed: %d, was %d" % (len(a), len(o)))
want = bytearray(o)
for r in ds.records(s):
    if r[0] < k and r[1] in (ds.T_DATA, ds.T_ZERO):
        lo, hi = r[2] * bs, min((r[2] + r[3]) * bs, len(a))
        want[lo:hi] = n[lo:hi]
if a != bytes(want):
    i = next(i for i in range(len(a)) if a[i] != want[i])
    sys.exit("byte %d (block %d) is wrong" % (i, i // bs))
PY
}

# fail WHY: a step the rest of the test needs went wrong; stop here.
fail() {
	not_ok "$*"
	done_testing
}
