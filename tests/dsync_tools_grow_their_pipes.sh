#!/bin/bash
# dmextract grows the pipe it writes the stream into, and dmmerge the pipe
# it reads it from, to a stream record (1 MiB): through the default 64 KiB
# pipe a record takes 16 wakeups of each side, and the stream between two
# processes ran at less than half the speed (docs/benchmarks-dsync.md).
# A file or a terminal is left alone; the copy must stay byte-identical;
# and a reader that leaves the stream unread still fails dmextract.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools

cd "$TMP" || exit 1
mkimg src 4
head -c 262144 src >small
cp src dst
cp src orig
scribble src 100 1 >dirty

# pipe_size ROLE: run dmextract (ROLE extract) or dmmerge (ROLE merge) on
# a pipe the test holds both ends of, and print the pipe's size once the
# tool has exited (F_GETPIPE_SZ).
pipe_size() {
	$PY - "$1" <<'PY'
import fcntl, os, subprocess, sys
F_GETPIPE_SZ = 1032
r, w = os.pipe()
if sys.argv[1] == "extract":
    p = subprocess.Popen(["dmextract", "--no-progress", "--dirty", "dirty",
                          "--device", "src"], stdout=w)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 20):
        data += chunk
    p.wait()
    size = fcntl.fcntl(r, F_GETPIPE_SZ)
    open("stream", "wb").write(data)
else:
    p = subprocess.Popen(["dmmerge", "--no-progress", "dst"], stdin=r)
    with os.fdopen(w, "wb") as f:
        f.write(open("stream", "rb").read())
    p.wait()
    size = fcntl.fcntl(r, F_GETPIPE_SZ)
print(size, p.returncode)
PY
}

read -r size rc < <(pipe_size extract)
[ "$rc" = 0 ] && [ "$size" = $((1 << 20)) ] &&
	ok "dmextract grew its output pipe to 1 MiB" ||
	not_ok "dmextract: exit $rc, output pipe $size bytes"

read -r size rc < <(pipe_size merge)
[ "$rc" = 0 ] && [ "$size" = $((1 << 20)) ] &&
	ok "dmmerge grew its input pipe to 1 MiB" ||
	not_ok "dmmerge: exit $rc, input pipe $size bytes"
check "the replica is the source after the pipe's growth" cmp -s src dst

# The whole stream fits in the grown pipe: dmextract must still fail when
# its reader exits with the stream unread (as dmmerge does when it refuses
# one), or it would commit an epoch nobody applied.
dmextract --no-progress --all --device small 2>"$TMP/err" |
	(sleep 0.5; head -c 100 >/dev/null)
rc=${PIPESTATUS[0]}
[ "$rc" = 1 ] && grep -q 'unread' "$TMP/err" &&
	ok "a reader that leaves the stream unread fails dmextract" ||
	not_ok "a reader that leaves the stream unread: dmextract exit $rc"

# a stream in a file is not a pipe: nothing to grow, nothing refused
cp orig dst2
dmextract --dirty dirty --device src -o s2 && dmmerge dst2 <s2
check "a stream through files still applies" cmp -s src dst2

done_testing
