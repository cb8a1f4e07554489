#!/bin/bash
# The library's ABI bookkeeping agrees with itself: every exported symbol is
# in the version map, every map entry is exported, and every public function
# has a man page.
. "$(dirname "$0")/lib.sh"

so=$BUILD/lib/libtrack.so
[ -f "$so" ] || skip_all "build/lib/libtrack.so is not built"

nm -D --defined-only "$so" | awk '$2 == "T" { print $3 }' | sed 's/@.*//' |
	sort -u >"$TMP/exported"
sed -n 's/^[[:space:]]*\(track_[a-z0-9_]*\);.*/\1/p' "$TOP/libtrack/libtrack.map" |
	sort -u >"$TMP/mapped"

missing=$(comm -23 "$TMP/exported" "$TMP/mapped")
if [ -z "$missing" ]; then
	ok "every exported symbol is in libtrack.map"
else
	not_ok "exported but not in libtrack.map: $missing"
fi
missing=$(comm -13 "$TMP/exported" "$TMP/mapped")
if [ -z "$missing" ]; then
	ok "every libtrack.map entry is exported"
else
	not_ok "in libtrack.map but not exported: $missing"
fi
nopage=""
while read -r f; do
	[ -f "$TOP/libtrack/man/$f.3" ] || nopage="$nopage $f"
done <"$TMP/exported"
if [ -z "$nopage" ]; then
	ok "every public function has a man page"
else
	not_ok "no man page for:$nopage"
fi
other=$(nm -D --defined-only "$so" | awk '$2 != "A" { print $3 }' | grep -v '^track_' | sed 's/@.*//' | sort -u)
if [ -z "$other" ]; then
	ok "only track_* symbols are exported"
else
	not_ok "exported symbols outside the track_ namespace: $other"
fi
if readelf -d "$so" | grep -q 'SONAME.*libtrack\.so\.2\]'; then
	ok "soname is libtrack.so.2"
else
	not_ok "soname is not libtrack.so.2"
fi
done_testing
