#!/bin/sh
# Renames and deletes of files and trees: renames are replayed as renames
# in SYNCFOLDER (the same inode: nothing copied again, so the cloud client
# sees a move); deletes remove only what was synced; modes and mtimes
# follow; a rename right after a pull is not taken for the pull's echo.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
. "$(dirname "$0")/lib.sh"
uds_require

mkdir -p "$S/dir/sub" "$S/gone/deeper" "$W/outside"
head -c 1048576 /dev/urandom >"$S/big.bin"
echo x >"$S/dir/x"
echo y >"$S/dir/sub/y"
echo z >"$S/gone/deeper/z"
echo p >"$S/p"
echo q >"$S/q"
echo a >"$S/a"
mkdir -p "$W/incoming/tree"
echo in >"$W/incoming/tree/file"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced || not_ok "the first sync"
ino_big=$(stat -c %i "$D/big.bin")
ino_dir=$(stat -c %i "$D/dir")
pushed=$(uds_status bytes_pushed)

mv "$S/big.bin" "$S/big2.bin"
mv "$S/dir" "$S/dir2"
mv "$S/p" "$S/q"			# over an existing file
mv "$S/a" "$S/b" && mv "$S/b" "$S/c"	# a chain
if uds_wait_synced; then ok "renames: the trees are equal"; else
	not_ok "renames: the trees are equal"; fi
check "a file rename is a rename in SYNCFOLDER" \
	[ "$(stat -c %i "$D/big2.bin")" = "$ino_big" ]
check "a directory rename is a rename in SYNCFOLDER" \
	[ "$(stat -c %i "$D/dir2")" = "$ino_dir" ]
check "nothing was copied again" \
	[ "$(uds_status bytes_pushed)" -lt $((pushed + 4096)) ]
check "a rename over a file replaces it" grep -qx p "$D/q"

rm "$S/q"
rm -r "$S/gone"
mv "$S/dir2" "$W/outside/"		# moved out of SAVINGBOX: a delete
mv "$W/incoming/tree" "$S/tree"		# moved in: a create
chmod 700 "$S/c"
touch -d "2001-02-03 04:05:06" "$S/big2.bin"
if uds_wait_synced; then ok "deletes: the trees are equal"; else
	not_ok "deletes: the trees are equal"; fi
check "a deleted file is deleted" [ ! -e "$D/q" ]
check "a deleted tree is deleted" [ ! -e "$D/gone" ]
check "a tree moved out is deleted" [ ! -e "$D/dir2" ]
check "what was moved out is left alone" [ -f "$W/outside/dir2/sub/y" ]
check "a tree moved in is created" [ -f "$D/tree/file" ]
check "modes follow" [ "$(stat -c %a "$D/c")" = 700 ]
check "mtimes follow" \
	[ "$(stat -c %Y "$D/big2.bin")" = "$(stat -c %Y "$S/big2.bin")" ]
# A directory moved over an empty one just brought back from SYNCFOLDER,
# inside the 3 s in which uds-plus takes events there for its own echo.
mkdir "$S/y" && echo yy >"$S/y/f"
uds_wait_synced || not_ok "y is synced"
mkdir "$D/x"
_i=0
while [ ! -d "$S/x" ] && [ $_i -lt 300 ]; do sleep 0.02; _i=$((_i + 1)); done
mv -T "$S/y" "$S/x"
if uds_wait_synced 20; then
	ok "a directory moved over one just pulled is moved in SYNCFOLDER"
else
	not_ok "a directory moved over one just pulled is moved in SYNCFOLDER"
fi
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
