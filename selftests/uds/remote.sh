#!/bin/sh
# The other direction: what the cloud client writes into SYNCFOLDER (a
# collaborator's edit, replaced by rename the way clients do, or in
# place) comes back into SAVINGBOX, and uds-plus never echoes its own
# writes: no push follows a pull.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
. "$(dirname "$0")/lib.sh"
uds_require

echo "version 1" >"$S/notes.txt"
mkdir -p "$S/proj/src"
echo "int main;" >"$S/proj/src/main.c"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced || not_ok "the first sync"
pushes=$(uds_status pushes)
pushed=$(uds_status bytes_pushed)

# A client replaces a file: new inode, renamed over the old one.
echo "version 2 from a collaborator" >"$D/.notes.txt.download"
mv "$D/.notes.txt.download" "$D/notes.txt"
# In place, as rsync --inplace or an editor in the folder would.
echo "more" >>"$D/proj/src/main.c"
# New things, a deletion, a rename.
mkdir -p "$D/shared/deep"
head -c 100000 /dev/urandom >"$D/shared/deep/photo.jpg"
echo "new" >"$D/readme.md"
chmod 600 "$D/readme.md"
uds_wait_synced || not_ok "changes come back"
check "a replaced file comes back" \
	grep -q "from a collaborator" "$S/notes.txt"
check "an in-place edit comes back" grep -q more "$S/proj/src/main.c"
check "a new directory tree comes back" \
	cmp -s "$S/shared/deep/photo.jpg" "$D/shared/deep/photo.jpg"
rm "$D/notes.txt"
mv "$D/proj" "$D/project"
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
check "a remote delete is mirrored" [ ! -e "$S/notes.txt" ]
check "a remote directory rename is mirrored" \
	[ -f "$S/project/src/main.c" ] && [ ! -e "$S/proj" ]
check "no push echoed the pulls" [ "$(uds_status pushes)" = "$pushes" ]
check "no byte went back into SYNCFOLDER" \
	[ "$(uds_status bytes_pushed)" = "$pushed" ]
check "pulls were counted" [ "$(uds_status files_pulled)" -ge 4 ]
# And local work still flows the other way.
echo "local again" >>"$S/project/src/main.c"
if uds_wait_synced; then ok "local changes still go out"; else
	not_ok "local changes still go out"; fi
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
