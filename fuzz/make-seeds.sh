#!/bin/bash
# Write the seed corpus of the fuzz targets: small valid streams made by
# dmextract (and an undo file made by dmmerge), plain and deflated, full and
# incremental, with data and zero runs. 64 KiB devices with 512-byte
# blocks, so every seed is small.
#
# Usage: fuzz/make-seeds.sh OUTDIR   (tools from build/bin)
#
# The "old" image has the contents fuzz_dmmerge.c writes to its target
# (the same generator), so the incremental seeds apply to it.
set -eu
mkdir -p "$1"
out=$(cd "$1" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
PATH=$top/build/bin:$PATH
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

python3 - <<'PY'
x = 1
old = bytearray(65536)
for i in range(65536):
    x = (x * 1103515245 + 12345) & 0xffffffff
    old[i] = (x >> 16) & 0xff
open("old", "wb").write(old)
new = bytearray(old)
new[512 * 3:512 * 9] = bytes(range(256)) * 12          # data run
new[512 * 20:512 * 40] = bytes(512 * 20)               # zero run
new[512 * 100:512 * 101] = b"\xa5" * 512               # one block
new[65536 - 512:] = b"end!" * 128                      # the last block
open("new", "wb").write(new)
PY
printf '3-8\n20-39\n100\n127\n' >dirty
x() { dmextract --block-size 512 --source-id fuzz --no-progress "$@"; }
x --all --device new --new-epoch 2 -o "$out/full.stream"
x --all --device new --new-epoch 2 -z -o "$out/full-z.stream"
x --dirty dirty --device new --base-epoch 1 --new-epoch 2 \
	-o "$out/incremental.stream"
x --dirty dirty --device new --base-epoch 1 --new-epoch 2 -z9 \
	-o "$out/incremental-z.stream"
printf '20-39\n' >zeros
x --dirty zeros --device new --base-epoch 1 --new-epoch 3 \
	-o "$out/zero-run.stream"
: >empty
x --dirty empty --device new --base-epoch 1 --new-epoch 2 \
	-o "$out/no-records.stream"
cp old t
printf 'source-id fuzz\nepoch 1\nblock-size 512\ndevice-size 65536\n' >st
dmmerge --state st --undo "$out/undo.stream" t <"$out/incremental.stream"
