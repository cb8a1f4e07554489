#!/bin/sh
# Symlinks are mirrored as links and never followed: a link pointing out
# of SAVINGBOX does not bring the outside in, and no write ever lands
# outside the two folders, even when a directory with pending changes is
# swapped for a link to the outside, on either side.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
. "$(dirname "$0")/lib.sh"
uds_require

out=$W/outside
mkdir -p "$out/private" "$W/outside2"
echo "secret" >"$out/private/key"
echo "canary" >"$W/outside2/canary"
snapshot() {
	(cd "$W" && find outside outside2 -exec stat -c '%n %s %Y %a' {} + |
		sort && cat outside/private/key outside2/canary)
}
before=$(snapshot)
ln -s "$out" "$S/abs-link"
ln -s ../outside "$S/rel-link"
ln -s /nonexistent/target "$S/dangling"
mkdir -p "$S/work"
echo "w" >"$S/work/file"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
check "a link is mirrored as a link" [ -L "$D/abs-link" ]
check "with the same target" \
	[ "$(readlink "$D/abs-link")" = "$(readlink "$S/abs-link")" ]
check "the outside is not copied in" [ -z "$(find "$D" -name key)" ]

# Changes pending in work/, then work/ becomes a link to the outside.
echo "pending" >>"$S/work/file"
echo "new" >"$S/work/new"
rm -r "$S/work"
ln -s "$W/outside2" "$S/work"
# The same on the remote side for another directory.
mkdir -p "$S/shared"
echo s >"$S/shared/doc"
uds_wait_synced || not_ok "shared/ is synced"
# The swap and the local edit must reach uds-plus together: on a slow VM
# it pulled the remote 'rm -r' alone, before the link and the edit existed
# (a plain remote delete, rightly applied), and the test lost its case.
kill -STOP "$UDS_PID"
rm -r "$D/shared"
ln -s "$W/outside2" "$D/shared"
echo "local edit" >>"$S/shared/doc"
kill -CONT "$UDS_PID"
sleep 3
if uds_wait_synced; then ok "after the swaps: the trees are equal"; else
	not_ok "after the swaps: the trees are equal"; fi
check "the remote link was kept as a conflict copy" \
	[ -L "$S/$(ls "$S" | grep "^shared (testbox's conflicted copy")" ]
check "the local edit below it reached SYNCFOLDER" \
	grep -q "local edit" "$D/shared/doc"
check "nothing outside the two folders changed" [ "$(snapshot)" = "$before" ]
check "work/ is now a link in SYNCFOLDER too" [ -L "$D/work" ]

# A collaborator replaces a directory nobody touched here with a link to
# the outside. Taken as it is, SAVINGBOX/pics/... would lead outside for
# every program that follows links: the directory stays, the link is kept
# beside it as a conflict copy.
mkdir -p "$S/pics"
echo p >"$S/pics/a.jpg"
uds_wait_synced || not_ok "pics/ is synced"
kill -STOP "$UDS_PID"	# one swap, seen in one pull (see above)
rm -r "$D/pics"
ln -s "$W/outside2" "$D/pics"
kill -CONT "$UDS_PID"
sleep 1
if uds_wait_synced; then ok "after the remote swap: the trees are equal"; else
	not_ok "after the remote swap: the trees are equal"; fi
check "pics/ is still a directory in SAVINGBOX" [ -d "$S/pics" ] &&
	[ ! -L "$S/pics" ]
check "with its file" grep -qx p "$S/pics/a.jpg"
check "and a directory again in SYNCFOLDER" [ -d "$D/pics" ] &&
	[ ! -L "$D/pics" ] && grep -qx p "$D/pics/a.jpg"
check "the link is kept as a conflict copy" \
	[ -L "$S/$(ls "$S" | grep "^pics (testbox's conflicted copy")" ]
check "nothing outside the two folders changed" [ "$(snapshot)" = "$before" ]
check "uds-plus is still running" kill -0 "$UDS_PID"
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
