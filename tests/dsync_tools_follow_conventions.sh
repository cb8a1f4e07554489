#!/bin/bash
# dmextract, dmmerge and dmsync: --help fits a screen and exits 0, wrong
# usage exits 2 and says how to get help, every tool has a man page with
# EXAMPLES and EXIT STATUS that groff formats without warnings.
. "$(dirname "$0")/lib.sh"

for t in dmextract dmmerge dmsync; do
	[ -x "$BUILD/bin/$t" ] || skip_all "build/bin/$t is not built"
	out=$("$t" --help)
	rc=$?
	lines=$(printf '%s\n' "$out" | wc -l)
	wide=$(printf '%s\n' "$out" | awk 'length($0) > 80' | wc -l)
	[ $rc = 0 ] && [ "$lines" -le 24 ] && [ "$wide" = 0 ] &&
		ok "$t --help fits a screen ($lines lines)" ||
		not_ok "$t --help: exit $rc, $lines lines, $wide too wide"
	"$t" --no-such-option >/dev/null 2>"$TMP/err"
	rc=$?
	[ $rc = 2 ] && grep -q "Try '$t --help'" "$TMP/err" &&
		ok "$t: an unknown option exits 2" ||
		not_ok "$t: an unknown option exits $rc"
	page=$TOP/tools/man/$t.1
	if [ -f "$page" ] && grep -q '^\.SH EXAMPLES' "$page" &&
		grep -q '^\.SH EXIT STATUS' "$page"; then
		ok "$t.1 has EXAMPLES and EXIT STATUS"
	else
		not_ok "$t.1 has EXAMPLES and EXIT STATUS"
	fi
	if command -v groff >/dev/null; then
		warn=$(groff -man -ww -z "$page" 2>&1)
		[ -z "$warn" ] && ok "$t.1 formats without warnings" ||
			not_ok "$t.1: $warn"
	fi
done

usage_fails() {
	"$@" </dev/null >/dev/null 2>&1
	[ $? = 2 ] && ok "usage error exits 2: $*" ||
		not_ok "usage error exits 2: $*"
}
usage_fails dmextract
usage_fails dmextract --device x
usage_fails dmextract --dirty x
usage_fails dmextract --dirty x --all --device y
usage_fails dmextract --block-size 3000 --all --device y
usage_fails dmextract --compress=12 --all --device y
usage_fails dmextract --base-epoch 5 --new-epoch 3 --dirty x --device y
usage_fails dmextract a b
usage_fails dmmerge
usage_fails dmmerge --verify --undo u t
usage_fails dmmerge a b
usage_fails dmsync vm1
usage_fails dmsync --rsh ssh vm1 /local/path
usage_fails dmsync vm1 host:
usage_fails dmsync --fsfreeze "$TMP" --dirty x --device y vm1:/t

# --fsfreeze names a mount point: anything else is refused before dm-track
# is touched, with a message that says so.
for t in dmsync dmextract; do
	"$t" --fsfreeze "$TMP" vm1 $([ $t = dmsync ] && echo /t) \
		>/dev/null 2>"$TMP/err"
	rc=$?
	[ $rc = 2 ] && grep -q "$TMP: not a mount point" "$TMP/err" &&
		ok "$t --fsfreeze refuses a directory that is not a mount point" ||
		not_ok "$t --fsfreeze on a plain directory: exit $rc: $(cat "$TMP/err")"
	"$t" --fsfreeze /etc/hostname vm1 $([ $t = dmsync ] && echo /t) \
		>/dev/null 2>"$TMP/err"
	rc=$?
	[ $rc = 2 ] && grep -q "give the directory" "$TMP/err" &&
		ok "$t --fsfreeze refuses a file" ||
		not_ok "$t --fsfreeze on a file: exit $rc: $(cat "$TMP/err")"
done
done_testing
