# Run a uds-plus test of selftests/uds/ on the host (sourced by the
# tests/uds-*.sh wrappers). The host kernel is a stock one, so uds-plus
# runs in fallback mode; the VM runs the same scripts in ranges mode.
. "$(dirname "$0")/lib.sh"

uds_host_run() {
	local script=$TOP/selftests/uds/$1.sh

	shift
	[ -x "$BUILD/bin/uds-plus" ] || skip_all "build/bin/uds-plus is not built"
	cc -O2 -o "$TMP/treecmp" "$TOP/selftests/uds/treecmp.c" ||
		skip_all "cannot build selftests/uds/treecmp.c"
	UDS_SKIP_RC=77 UDS_TREECMP=$TMP/treecmp bash "$script" "$@"
	exit $?
}
