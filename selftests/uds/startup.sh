#!/bin/sh
# Starting: an empty SAVINGBOX is filled from SYNCFOLDER; two folders that
# were never synced are merged (nothing deleted, differing files kept
# both); a restart with nothing changed does nothing at all.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
. "$(dirname "$0")/lib.sh"
uds_require

mkdir -p "$D/photos/2024" "$D/docs"
head -c 300000 /dev/urandom >"$D/photos/2024/a.jpg"
echo "cv" >"$D/docs/cv.txt"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
if uds_wait_synced; then ok "an empty SAVINGBOX is filled"; else
	not_ok "an empty SAVINGBOX is filled"; fi
check "filling it pushed nothing back" [ "$(uds_status pushes)" = 0 ]
uds_stop

# A restart with nothing changed: no work.
uds_start || not_ok "uds-plus starts again"
sleep 1
uds_refresh
check "a restart with nothing changed pushes nothing" \
	[ "$(uds_status pushes)" = 0 ] && [ "$(uds_status pulls)" = 0 ]
uds_stop

# Two folders never synced with each other (a fresh state directory).
rm -rf "$W/state"
mkdir "$W/state"
echo "only here" >"$S/local-only.txt"
echo "only there" >"$D/remote-only.txt"
echo "same" >"$S/same.txt"
echo "same" >"$D/same.txt"
echo "mine" >"$S/clash.txt"
echo "theirs" >"$D/clash.txt"
uds_start || not_ok "uds-plus starts on two unsynced folders"
if uds_wait_synced; then ok "two unsynced folders are merged"; else
	not_ok "two unsynced folders are merged"; fi
check "nothing was deleted" [ -f "$S/photos/2024/a.jpg" ] &&
	[ -f "$S/remote-only.txt" ] && [ -f "$D/local-only.txt" ]
check "equal files are not a conflict" [ "$(uds_status conflicts)" = 1 ]
check "a differing file keeps both" grep -qx mine "$D/clash.txt" &&
	grep -qx theirs "$S/clash (testbox's conflicted copy "*").txt"

# One uds-plus per folder, whatever its state directory: a second one on
# the same pair (or the same SYNCFOLDER) would read the first one's writes
# as a collaborator's and merge them back and forth.
mkdir -p "$W/state2" "$W/state3" "$W/other"
"$UDS_BIN" --state-dir "$W/state2" --once "$S" "$D" 2>"$W/second.log"
check "a second uds-plus on the same folders refuses (exit 1)" [ $? = 1 ]
check "and says why" grep -q "another uds-plus already syncs" "$W/second.log"
"$UDS_BIN" --state-dir "$W/state3" --once "$W/other" "$D" 2>"$W/third.log"
check "a second uds-plus into the same SYNCFOLDER refuses (exit 1)" [ $? = 1 ]
check "the second one changed nothing" [ ! -e "$W/other/same.txt" ]
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
