#!/bin/sh
# Any file name: spaces, newlines, tabs, UTF-8, leading dashes, glob and
# quote characters, backslashes, 255-byte names, and paths longer than
# PATH_MAX (made one directory at a time), in both directions.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
. "$(dirname "$0")/lib.sh"
uds_require

nl=$(printf 'new\nline')
tab=$(printf 'tab\there')
long=$(printf '%0255d' 0 | tr 0 n)
uds_start --no-fsync || { not_ok "uds-plus starts"; done_testing; }
check_mode
for name in "with space" "$nl" "$tab" "caf$(printf '\303\251') $(printf '\342\234\223') $(printf '\346\227\245\346\234\254')" \
	"-leading-dash" "*star?" "back\\slash" "quote\"d'" "%25percent" \
	"$long" " leading and trailing "; do
	echo "$name" >"$S/$name"
done
mkdir "$S/dir with $nl"
echo inside >"$S/dir with $nl/file $tab"
comp=$(printf '%0200d' 0 | tr 0 d)
# 25 levels of 200 bytes, built outside with short paths only (a shell's
# cd cannot go past PATH_MAX everywhere), then moved in at once.
mkdir "$W/deep" && echo "deep" >"$W/deep/leaf"
i=1
while [ $i -lt 25 ]; do
	mkdir "$W/wrap" && mv "$W/deep" "$W/wrap/$comp" &&
		mv "$W/wrap" "$W/deep" || break
	i=$((i + 1))
done
mv "$W/deep" "$S/$comp"
check "a path longer than PATH_MAX was made" [ $i = 25 ]
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
check "the newline name arrived as it is" [ -f "$D/$nl" ]
check "the 255-byte name arrived" [ -f "$D/$long" ]

mv "$S/$nl" "$S/renamed $nl again"
rm "$S/$tab"
echo "from afar" >"$D/remote $nl $(printf '\360\237\230\200')"
if uds_wait_synced; then ok "renames, deletes and pulls of odd names"; else
	not_ok "renames, deletes and pulls of odd names"; fi
check "uds-plus exits cleanly on SIGTERM" uds_stop
# Take the deep chains apart level by level: busybox rm cannot go deep.
unwind() {
	while [ -d "$1/$comp" ]; do
		mv "$1/$comp" "$W/unwind" || break
		if [ -d "$W/unwind/$comp" ]; then
			mv "$W/unwind/$comp" "$1/$comp" || break
		fi
		rm -rf "$W/unwind"
	done
}
unwind "$S"
unwind "$D"
done_testing
