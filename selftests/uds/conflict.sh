#!/bin/sh
# A file changed in both folders before a push: both versions are kept.
# SAVINGBOX's wins in both folders; the collaborator's is saved beside it
# as "NAME (HOST's conflicted copy DATE).EXT", the way Dropbox names them.
# A file deleted on one side and changed on the other is kept, changed.
UDS_T=${UDS_T:-3}
UDS_F=${UDS_F:-10}
. "$(dirname "$0")/lib.sh"
uds_require

echo "original" >"$S/report.txt"
echo "keep me" >"$S/victim.txt"
echo "stay" >"$S/other.txt"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced || not_ok "the first sync"
pushes0=$(uds_status pushes)

# Local edits wait for the timer (t = 3 s)...
echo "local edit" >"$S/report.txt"
rm "$S/victim.txt"
# ...while the collaborator's arrive now.
echo "remote edit" >"$D/.tmp" && mv "$D/.tmp" "$D/report.txt"
echo "remote change" >>"$D/victim.txt"
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
check "SAVINGBOX's version wins in SAVINGBOX" grep -qx "local edit" "$S/report.txt"
check "SAVINGBOX's version wins in SYNCFOLDER" grep -qx "local edit" "$D/report.txt"
copy=$(ls "$S" | grep "^report (testbox's conflicted copy [0-9-]*)\.txt$")
check "the remote version is kept as a Dropbox-style conflict copy" \
	[ -n "$copy" ]
[ -n "$copy" ] && check "the conflict copy holds the remote edit" \
	grep -qx "remote edit" "$S/$copy"
check "a file deleted here but changed there is kept, changed" \
	grep -q "remote change" "$S/victim.txt"
check "the other file is untouched" grep -qx stay "$S/other.txt"
check "one conflict counted" [ "$(uds_status conflicts)" = 1 ]
# Settling the conflict wrote SAVINGBOX's version into SYNCFOLDER and
# moved the other aside there: the client syncs that, so it is a push.
pushes1=$(uds_status pushes)
check_between "the conflict's writes into SYNCFOLDER count as pushes" \
	$((pushes1 - pushes0)) 1 2
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
