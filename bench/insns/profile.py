#!/usr/bin/python3
"""Guest instructions per write(2), by function, from bench/insns/tbcount.c
counts: the table bench/write-path-insns.sh prints.

Usage: profile.py DIR N CONFIG

DIR holds, for KERNEL in unpatched and patched, KERNEL.nm (nm of its
vmlinux) and KERNEL-MODE.txt (the plugin's counts while a boot wrote N
blocks in MODE). A mode's cost per write is its count / N.
"""
import bisect
import collections
import os
import sys

MODES = ["none", "inotify", "inotify-ranges", "fanotify", "fanotify-ranges"]
# What each mode is compared with on the kernel without the series
BASE = {"inotify-ranges": "inotify", "fanotify-ranges": "fanotify"}


def symbols(path):
    table = []
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) == 3 and fields[1] in "tTwW":
                table.append((int(fields[0], 16), fields[2]))
    table.sort()
    return [a for a, _ in table], [n for _, n in table]


def by_function(path, syms):
    addrs, names = syms
    count = collections.Counter()
    with open(path) as f:
        for line in f:
            vaddr, insns, runs = line.split()
            i = bisect.bisect_right(addrs, int(vaddr, 16)) - 1
            count[names[i] if i >= 0 else "?"] += int(insns) * int(runs)
    return count


def per_write(d, kernel, mode, n, syms):
    path = os.path.join(d, "%s-%s.txt" % (kernel, mode))
    if not os.path.exists(path):
        return None
    run = by_function(path, syms)
    return {f: run[f] / n for f in run}


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: profile.py DIR N CONFIG")
    d, n, config = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cost = {}
    for kernel in ("unpatched", "patched"):
        syms = symbols(os.path.join(d, kernel + ".nm"))
        for mode in MODES:
            c = per_write(d, kernel, mode, n, syms)
            if c is not None:
                cost[kernel, mode] = c
    print("%-16s %11s %11s %10s %8s" %
          ("case", "unpatched", "patched", "difference", "ratio"))
    rows = []
    for mode in MODES:
        base = BASE.get(mode, mode)
        if ("patched", mode) not in cost or ("unpatched", base) not in cost:
            continue
        p, u = cost["patched", mode], cost["unpatched", base]
        tp, tu = sum(p.values()), sum(u.values())
        note = " (vs unpatched %s)" % base if base != mode else ""
        print("%-16s %11.0f %11.0f %+10.0f %8.4f%s" %
              (mode, tu, tp, tp - tu, tp / tu, note))
        rows.append((mode, p, u))
    print()
    print("where the differences are: instructions per write, patched "
          "minus unpatched, by function (the largest, %s kernels)" % config)
    for mode, p, u in rows:
        diff = {f: p.get(f, 0) - u.get(f, 0) for f in set(p) | set(u)}
        top = sorted(diff, key=lambda f: -abs(diff[f]))[:8]
        print("  %-15s %s" % (mode, ", ".join(
            "%s %+.0f" % (f, diff[f]) for f in top if abs(diff[f]) >= 1)))
    for mode, p, u in rows:
        print("insns-per-write %s %s %.0f %.0f" %
              (config, mode, sum(u.values()), sum(p.values())))


if __name__ == "__main__":
    main()
