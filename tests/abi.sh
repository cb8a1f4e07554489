#!/bin/bash
# The libraries' ABI bookkeeping agrees with itself and with the headers:
# every exported symbol is in its version map and has a man page, every
# map entry is exported, every page names a real function, names follow
# track_<object>_<verb> with one way to free, no function is named like a
# type, the static libraries export nothing public-looking that is not
# public, and every public header compiles on its own in C and in C++.
. "$(dirname "$0")/lib.sh"

inc=$TOP/libtrack/include
for lib in libtrack libtrack-dm; do
	so=$BUILD/lib/$lib.so
	[ -f "$so" ] || skip_all "build/lib/$lib.so is not built"
	map=$TOP/libtrack/$lib.map
	nm -D --defined-only "$so" | awk '$2 == "T" { print $3 }' |
		sed 's/@.*//' | sort -u >"$TMP/$lib.exported"
	sed -n 's/^[[:space:]]*\(track_[a-z0-9_]*\);.*/\1/p' "$map" |
		sort -u >"$TMP/$lib.mapped"
	missing=$(comm -23 "$TMP/$lib.exported" "$TMP/$lib.mapped")
	[ -z "$missing" ] && ok "$lib: every exported symbol is in $lib.map" ||
		not_ok "$lib: exported but not in $lib.map: $missing"
	missing=$(comm -13 "$TMP/$lib.exported" "$TMP/$lib.mapped")
	[ -z "$missing" ] && ok "$lib: every $lib.map entry is exported" ||
		not_ok "$lib: in $lib.map but not exported: $missing"
	other=$(nm -D --defined-only "$so" | awk '$2 != "A" { print $3 }' |
		grep -v '^track_' | sed 's/@.*//' | sort -u)
	[ -z "$other" ] && ok "$lib: only track_* symbols are exported" ||
		not_ok "$lib: exported outside the track_ namespace: $other"
	if readelf -d "$so" | grep -q "SONAME.*$lib\.so\.2\]"; then
		ok "$lib: soname is $lib.so.2"
	else
		not_ok "$lib: soname is not $lib.so.2"
	fi
	# Hidden helpers in the static library must not look public.
	leak=$(nm --defined-only "$BUILD/lib/$lib.a" 2>/dev/null |
		awk '$2 ~ /^[TDBR]$/ { print $3 }' | grep '^track_' |
		sort -u | comm -23 - "$TMP/$lib.mapped")
	[ -z "$leak" ] && ok "$lib.a: no internal symbol carries the track_ prefix" ||
		not_ok "$lib.a: internal symbols with the public prefix: $leak"
done
sort -u "$TMP"/*.exported >"$TMP/all"
dup=$(comm -12 "$TMP/libtrack.exported" "$TMP/libtrack-dm.exported")
[ -z "$dup" ] && ok "no symbol is in both libraries" || not_ok "in both: $dup"
dm=$(grep -v '^track_dm_' "$TMP/libtrack-dm.exported")
[ -z "$dm" ] && ! grep -q '^track_dm_' "$TMP/libtrack.exported" &&
	ok "track_dm_* is exactly libtrack-dm" || not_ok "track_dm_* split: $dm"

# Man pages: one per function (links allowed), none for what is not there.
nopage=""
while read -r f; do
	[ -f "$TOP/libtrack/man/$f.3" ] || nopage="$nopage $f"
done <"$TMP/all"
[ -z "$nopage" ] && ok "every public function has a man page" ||
	not_ok "no man page for:$nopage"
stale=""
for p in "$TOP"/libtrack/man/*.3; do
	f=$(basename "$p" .3)
	grep -qx "$f" "$TMP/all" || stale="$stale $f"
done
[ -z "$stale" ] && ok "every man page is of a public function" ||
	not_ok "man pages without a function:$stale"
check "libtrack(7) exists" test -f "$TOP/libtrack/man/libtrack.7"
noref=""
for p in "$TOP"/libtrack/man/*.3; do
	grep -q '^\.so' "$p" && continue
	grep -q 'libtrack (7)' "$p" || noref="$noref $(basename "$p")"
done
[ -z "$noref" ] && ok "every man page points at libtrack(7)" ||
	not_ok "no SEE ALSO libtrack(7):$noref"
prot=""
while read -r f; do
	grep -q "\b$f(" "$inc"/libtrack/*.h || prot="$prot $f"
	page=$TOP/libtrack/man/$f.3
	head -1 "$page" | grep -q '^\.so' &&
		page=$TOP/libtrack/man/$(sed -n 's,^\.so man3/,,p' "$page")
	grep -q "$f" "$page" || prot="$prot $f(page)"
done <"$TMP/all"
[ -z "$prot" ] && ok "every function is declared in a header and named on its page" ||
	not_ok "not declared, or not on its page:$prot"

# Names: track_<object>_<verb>, one way to free, no function named like a type.
bad=$(grep -vE '^track_(watch|stream|extents|extract|apply|batch|dm|version|check)_[a-z0-9_]+$' "$TMP/all")
[ -z "$bad" ] && ok "every function is track_<object>_<verb>" || not_ok "odd names: $bad"
close=$(grep -E '_close$' "$TMP/all")
[ -z "$close" ] && ok "handles are released by _free only" || not_ok "_close: $close"
types=$(cat "$inc"/libtrack/*.h | grep -oE '(struct|enum) track_[a-z0-9_]+|typedef [^;]*\(\*track_[a-z0-9_]+\)' |
	grep -oE 'track_[a-z0-9_]+' | sort -u)
clash=$(comm -12 <(echo "$types") "$TMP/all")
[ -z "$clash" ] && ok "no function is named like a type" || not_ok "functions named like types: $clash"

# "Negative = -errno" everywhere: no -1 sentinel among the results.
sentinel=$(grep -n -E '(-1|−1) (if|for|when|on|means)\b|returns? -1\b' "$inc"/libtrack/*.h)
[ -z "$sentinel" ] && ok "no -1 sentinel results in the headers" ||
	not_ok "-1 sentinels: $sentinel"

# Headers stand alone, in C and in C++ (extern "C", no C-only syntax).
hdrs=$(cd "$inc" && ls libtrack.h libtrack/*.h)
failed=""
for h in $hdrs; do
	printf '#include <%s>\n' "$h" >"$TMP/h.c"
	cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$inc" -c -o /dev/null \
		"$TMP/h.c" 2>>"$TMP/h.err" || failed="$failed $h(C)"
	cp "$TMP/h.c" "$TMP/h.cc"
	c++ -std=c++11 -Wall -Wextra -Werror -pedantic -I"$inc" -c -o /dev/null \
		"$TMP/h.cc" 2>>"$TMP/h.err" || failed="$failed $h(C++)"
done
[ -z "$failed" ] && ok "each public header compiles alone in C11 and C++11" ||
	not_ok "headers that do not stand alone:$failed: $(head -5 "$TMP/h.err")"
# Types and functions used side by side, as C++ code does.
cat >"$TMP/use.cc" <<'EOC'
#include <libtrack.h>
#include <libtrack/dm.h>
int f(struct track_dm *dm, struct track_watch *w);
int f(struct track_dm *dm, struct track_watch *w)
{
	track_dm_status st;
	track_watch_mode m = track_watch_get_mode(w);
	track_event ev = track_event();
	return track_dm_get_status(dm, &st) + (int)m + (int)ev.kind;
}
EOC
c++ -std=c++11 -Wall -Werror -I"$inc" -c -o /dev/null "$TMP/use.cc" 2>"$TMP/use.err" &&
	ok "C++ uses the types and the functions side by side" ||
	not_ok "C++ use: $(head -5 "$TMP/use.err")"
done_testing
