#!/bin/bash
# Write the seed corpus of the fuzz targets, one directory each:
#   OUTDIR/stream     small valid streams made by dmextract (and an undo
#                     file made by dmmerge), plain and deflated, full and
#                     incremental, with data and zero runs; 64 KiB devices
#                     with 512-byte blocks, so every seed is small
#                     (fuzz_stream_read, fuzz_dmmerge);
#   OUTDIR/watch      inotify records as read(2) returns them, plain and
#                     with IN_RANGE (fuzz_watch_parse);
#   OUTDIR/dm-status  dm-track status lines as dm-track.rst gives them
#                     (fuzz_dm_status).
#
# Usage: fuzz/make-seeds.sh OUTDIR   (tools from build/bin)
#
# The "old" image has the contents fuzz_dmmerge.c writes to its target
# (the same generator), so the incremental seeds apply to it.
set -eu
mkdir -p "$1/stream" "$1/watch" "$1/dm-status"
out=$(cd "$1" && pwd)/stream
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

# struct inotify_event { int wd; u32 mask, cookie, len; char name[len]; },
# an IN_RANGE record ending in { u64 offset, length; }.
python3 - "$out/../watch" <<'PY'
import struct, sys
IN_MODIFY, IN_CREATE, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x100, 0x40, 0x80
IN_Q_OVERFLOW, IN_RANGE = 0x4000, 0x00800000
def rec(wd, mask, name=b"", cookie=0, rng=None):
    area = name + b"\0" * (16 - len(name) % 16) if name else b""
    if rng is not None:
        area = (area or b"\0" * 16) + struct.pack("=QQ", *rng)
    return struct.pack("=iIII", wd, mask, cookie, len(area)) + area
seeds = {
    "modify": rec(1, IN_MODIFY),
    "create-named": rec(1, IN_CREATE, b"notes.txt"),
    "range": rec(2, IN_MODIFY | IN_RANGE, rng=(4096, 512)),
    "range-named": rec(1, IN_MODIFY | IN_RANGE, b"log", rng=(1 << 40, 1)),
    "rename-pair": rec(1, IN_MOVED_FROM, b"a", 7) + rec(1, IN_MOVED_TO, b"b", 7),
    "burst": b"".join(rec(1, IN_MODIFY | IN_RANGE, b"f", rng=(i * 2048, 2048))
                      for i in range(8)) + rec(-1, IN_Q_OVERFLOW),
}
for name, data in seeds.items():
    open(f"{sys.argv[1]}/{name}", "wb").write(data)
PY

s=$out/../dm-status
printf '8 262144 3 - 1 - 0 2099296 - 6b1f5e3c-3d4a-4c9e-9a63-2f5b3b3f8e10' >"$s/idle"
printf '8 1024 0 512 3 2 1 900 ok id' >"$s/frozen"
printf '8 1024 0 512 3 2 1 900 - id active 65536 16777216' >"$s/snapshot"
printf '8 1024 0 512 3 2 1 900 failed id failed - - 4096 1048576' >"$s/cow"
