#!/bin/bash
# A source id that dmextract or dmsync accept is one the state file keeps:
# ids that cannot be kept (empty, leading or trailing blanks) are refused
# at the door with exit 2, and an id with inner blanks goes through a
# full and an incremental apply with --state.
# timeout: 60
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools

cd "$TMP" || exit 1
mkimg src 1
echo 3 >dirty
for id in "" " vm1" "vm1 " "	vm1"; do
	run_status dmextract --all --device src --source-id "$id" -o s
	[ $status = 2 ] && grep -q "source-id" "$TMP/err" &&
		ok "dmextract refuses --source-id \"$id\"" ||
		not_ok "dmextract --source-id \"$id\": exit $status"
	run_status dmsync --source-id "$id" --dirty dirty --device src \
		t
	[ $status = 2 ] && grep -q "source-id" "$TMP/err" &&
		ok "dmsync refuses --source-id \"$id\"" ||
		not_ok "dmsync --source-id \"$id\": exit $status"
done

# inner blanks are kept
id="vm 1  (db)"
dmextract --all --device src --source-id "$id" --new-epoch 1 -o full ||
	fail "dmextract full"
dmextract --dirty dirty --device src --source-id "$id" --base-epoch 1 \
	--new-epoch 2 -o inc || fail "dmextract inc"
dmmerge --state state t <full || fail "full apply"
run_status dmmerge --state state t <inc
[ $status = 0 ] && grep -q '^epoch 2$' state &&
	ok "\"$id\": the incremental after the full stream is accepted" ||
	not_ok "\"$id\": exit $status, $(cat "$TMP/err")"

# a stream from elsewhere whose id starts with a blank: the state keeps it
cp full lead
stream_tool set-header lead source " vm1"
cp inc leadinc
stream_tool set-header leadinc source " vm1"
rm -f state t
dmmerge --state state t <lead || fail "full apply of \" vm1\""
run_status dmmerge --state state t <leadinc
[ $status = 0 ] && grep -q '^epoch 2$' state &&
	ok "\" vm1\" from a stream survives the state file" ||
	not_ok "\" vm1\": exit $status, $(cat "$TMP/err")"

done_testing
