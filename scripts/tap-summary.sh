#!/bin/sh
# Count test results in TAP/KTAP files written by the test runners.
#
# Usage: scripts/tap-summary.sh FILE...
# Prints "N passed, N failed, N skipped" and exits 1 if anything failed.
#
# Each top-level "ok"/"not ok" line is one program; the lines of its output
# before it, indented by four spaces, are its test cases. A program that reports
# cases is counted by its cases, plus one failure if it failed although no
# case did (a timeout, a crash, a kernel warning); one that reports none is
# counted as a single case.
exec awk '
function skip(line) { return line ~ /#[ \t]*[Ss][Kk][Ii][Pp]/ }
/^    (not )?ok / {
	leaves++
	if ($1 == "not") lf++
	else if (skip($0)) ls++
	else lp++
	next
}
# A top-level line closes the program whose nested output came before it.
/^(not )?ok / {
	failed = ($1 == "not")
	if (leaves) {
		pass += lp; fail += lf; skipped += ls
		if (failed && !lf)
			fail++
	} else if (failed) {
		fail++
	} else if (skip($0)) {
		skipped++
	} else {
		pass++
	}
	leaves = lp = lf = ls = 0
}
END {
	printf "%d passed, %d failed, %d skipped\n", pass, fail, skipped
	exit fail ? 1 : 0
}' "$@"
