#!/bin/bash
# timeout: 60
# The systemd unit does not restart uds-plus forever on a configuration
# error: every mistake in the configuration exits 2 (usage), and the unit
# lists 2 in RestartPreventExitStatus, so systemd stops and says why
# instead of retrying every RestartSec.
. "$(dirname "$0")/lib.sh"

UNIT=$TOP/tools/systemd/uds-plus@.service
[ -x "$BUILD/bin/uds-plus" ] || skip_all "build/bin/uds-plus is not built"

mkdir -p "$TMP/s" "$TMP/d"
exits_2() {
	local what=$1
	shift
	uds-plus --state-dir "$TMP/state" --once "$@" >"$TMP/out" 2>&1
	local rc=$?
	if [ $rc = 2 ]; then ok "$what: exit 2"; else
		not_ok "$what: exit $rc, not 2"; sed 's/^/# /' "$TMP/out"; fi
}
printf 'savingbox = %s\nsyncfolder = %s\ntimer = soon\n' "$TMP/s" "$TMP/d" \
	>"$TMP/bad-value.conf"
printf 'savingbox = %s\nsyncfolder = %s\ntimmer = 5s\n' "$TMP/s" "$TMP/d" \
	>"$TMP/bad-key.conf"
exits_2 "a misspelt key in the configuration" --config "$TMP/bad-key.conf"
exits_2 "a bad value in the configuration" --config "$TMP/bad-value.conf"
exits_2 "a configuration file that does not exist" --config "$TMP/none.conf"
exits_2 "an unknown option" --no-such-option "$TMP/s" "$TMP/d"

prevent=$(sed -n 's/^RestartPreventExitStatus=//p' "$UNIT")
check "the unit does not restart on exit 2 (RestartPreventExitStatus=$prevent)" \
	grep -qw 2 <<<"$prevent"
check "the unit still restarts on failures (Restart=on-failure)" \
	grep -qx 'Restart=on-failure' "$UNIT"
done_testing
