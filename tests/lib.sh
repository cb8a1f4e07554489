# TAP helpers for host shell tests (sourced).
#
#   plan N          print the plan (or call done_testing at the end)
#   ok NAME         a passing case
#   not_ok NAME     a failing case (remembered for the exit status)
#   check NAME CMD  run CMD; ok if it exits 0
#   skip_all WHY    skip the whole file (exit 77)
#   done_testing    print the plan if none was given, exit 1 on failures
#
# $TOP is the repository root, $BUILD its build directory, $TMP a scratch
# directory removed on exit.

TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$TOP/build
TMP=$(mktemp -d "${TMPDIR:-/tmp}/libtrack-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PATH=$BUILD/bin:$PATH

_n=0
_failed=0
_planned=0

plan() {
	echo "1..$1"
	_planned=1
}

ok() {
	_n=$((_n + 1))
	echo "ok $_n - $*"
}

not_ok() {
	_n=$((_n + 1))
	_failed=$((_failed + 1))
	echo "not ok $_n - $*"
}

check() {
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
}

skip_all() {
	echo "1..0 # SKIP $*"
	exit 77
}

# Print a diagnostic line.
diag() {
	echo "# $*"
}

done_testing() {
	[ $_planned = 1 ] || echo "1..$_n"
	[ $_failed = 0 ]
	exit $?
}
