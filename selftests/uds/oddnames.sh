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
(
	cd "$S" || exit 1
	i=0
	while [ $i -lt 25 ]; do
		mkdir "$comp" && cd "$comp" || exit 1
		i=$((i + 1))
	done
	echo "deep" >leaf
) || not_ok "a path longer than PATH_MAX can be made"
if uds_wait_synced 30; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
check "the newline name arrived as it is" [ -f "$D/$nl" ]
check "the 255-byte name arrived" [ -f "$D/$long" ]

mv "$S/$nl" "$S/renamed $nl again"
rm "$S/$tab"
echo "from afar" >"$D/remote $nl $(printf '\360\237\230\200')"
if uds_wait_synced 30; then ok "renames, deletes and pulls of odd names"; else
	not_ok "renames, deletes and pulls of odd names"; fi
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
