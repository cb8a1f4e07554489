#!/bin/bash
# "Not changed" is true: a full stream for an existing empty file does not
# resize it before every check passed, and a stream that fails afterwards
# leaves it empty again (a valid header may name a 4 EiB device).
# timeout: 60
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools

cd "$TMP" || exit 1
mkimg src 1
dmextract --all --device src --source-id vm1 --new-epoch 5 -o full ||
	fail "dmextract --all"
hlen=$(stream_tool records full | awk 'NR == 1 { print $5 }')

# empty STREAM-FILE NAME [dmmerge options]: the target stays empty
empty() {
	local s=$1 name=$2
	shift 2
	: >t
	run_status dmmerge "$@" t <"$s"
	if [ $status = 1 ] && [ "$(stat -c %s t)" = 0 ] &&
		[ "$(stat -c %b t)" = 0 ] && grep -qi "not changed\|nothing was written\|refusing" "$TMP/err"
	then
		ok "$name"
	else
		not_ok "$name: exit $status, t is $(stat -c %s t) bytes," \
			"$(cat "$TMP/err")"
	fi
}

# a 4 EiB header, the stream cut right after it
cp full huge
stream_tool set-header huge devsize $((1 << 62))
head -c "$hlen" huge >huge.cut
empty huge.cut "a cut 4 EiB full stream leaves an empty file empty"
cp full tera
stream_tool set-header tera devsize $((1 << 40))
head -c "$hlen" tera >tera.cut
empty tera.cut "a cut 1 TiB full stream leaves an empty file empty"
head -c $((hlen + 100)) full >full.cut
empty full.cut "a full stream cut in its first record leaves the file empty"
# refused by the state file (another source)
printf 'source-id vm2\nepoch 5\nblock-size 4096\ndevice-size 1048576\n' \
	>state
cp full other
stream_tool set-header other source vm3
empty other "a full stream refused by --state leaves the file empty" \
	--state state
# refused because the undo file cannot be written
mkdir ro
chmod 500 ro
if [ ! -w ro ]; then
	empty full "a full stream whose undo file fails leaves the file empty" \
		--undo ro/u
fi
# the good stream still applies, and sizes the file
run_status dmmerge t <full
[ $status = 0 ] && cmp -s t src && ok "the full stream sizes and fills t" ||
	not_ok "the full stream: exit $status, $(cat "$TMP/err")"

done_testing
