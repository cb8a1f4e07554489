#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Inspect and damage dsync streams for the host tests.

An independent reading of docs/stream-format.md: if this and libtrack
disagree about the format, the tests fail.

  dsync_stream.py records FILE
      one line per record: seq type first count hdr_offset payload_offset end
  dsync_stream.py set-header FILE FIELD VALUE
      set a header field (magic, vmajor, vminor, len, flags, block, devsize,
      base, new, source) and fix the header checksum
  dsync_stream.py set-record FILE SEQ FIELD VALUE
      set a record header field (type, flags, plen, seq, first, count) and
      fix the record's header checksum and the end record's digest
  dsync_stream.py flip FILE OFFSET
      flip the low bit of the byte at OFFSET
"""
import struct
import sys

HDR = 256
REC = 40
END_LEN = 48
T_DATA, T_ZERO, T_END = 1, 2, 3
HFIELDS = {  # name: (offset, struct format)
    "magic": (0, "8s"), "vmajor": (8, "<H"), "vminor": (10, "<H"),
    "crc": (12, "<I"), "len": (16, "<I"), "flags": (20, "<I"),
    "block": (24, "<I"), "devsize": (32, "<Q"), "base": (40, "<Q"),
    "new": (48, "<Q"), "created": (56, "<Q"), "source": (64, "128s"),
}
RFIELDS = {
    "type": (0, "<H"), "flags": (2, "<H"), "plen": (4, "<I"),
    "seq": (8, "<Q"), "first": (16, "<Q"), "count": (24, "<Q"),
    "pcrc": (32, "<I"), "hcrc": (36, "<I"),
}


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _T[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def get(buf, off, fmt):
    return struct.unpack_from(fmt, buf, off)[0]


def put(buf, off, fmt, value):
    struct.pack_into(fmt, buf, off, value)


def records(buf):
    """(seq, type, first, count, hdr_off, payload_off, end_off) each."""
    hlen = get(buf, 16, "<I")
    off, out = hlen, []
    while off + REC <= len(buf):
        typ = get(buf, off, "<H")
        plen = get(buf, off + 4, "<I")
        out.append((get(buf, off + 8, "<Q"), typ, get(buf, off + 16, "<Q"),
                    get(buf, off + 24, "<Q"), off, off + REC,
                    off + REC + plen))
        off += REC + plen
        if typ == T_END:
            break
    return out


def fix_header(buf):
    hlen = get(buf, 16, "<I")
    put(buf, 12, "<I", 0)
    put(buf, 12, "<I", crc32c(bytes(buf[:hlen])))


def fix_digest(buf):
    """Recompute the end record from the records before it."""
    hlen = get(buf, 16, "<I")
    digest = crc32c(bytes(buf[:hlen]))
    recs = records(buf)
    for r in recs:
        if r[1] == T_END:
            e = r[5]
            put(buf, e + 40, "<I", digest)
            put(buf, r[4] + 32, "<I", crc32c(bytes(buf[e:e + END_LEN])))
            put(buf, r[4] + 36, "<I", crc32c(bytes(buf[r[4]:r[4] + 36])))
            return
        digest = crc32c(bytes(buf[r[4]:r[4] + REC]), digest)


def number(s):
    return int(s, 0)


def main(argv):
    cmd, path = argv[1], argv[2]
    with open(path, "rb") as f:
        buf = bytearray(f.read())
    if cmd == "records":
        for r in records(buf):
            print(" ".join(str(x) for x in r))
        return 0
    if cmd == "set-header":
        off, fmt = HFIELDS[argv[3]]
        val = argv[4].encode() if fmt.endswith("s") else number(argv[4])
        put(buf, off, fmt, val)
        if argv[3] != "crc":
            fix_header(buf)
        fix_digest(buf)
    elif cmd == "set-record":
        seq = int(argv[3])
        r = [r for r in records(buf) if r[0] == seq][0]
        off, fmt = RFIELDS[argv[4]]
        put(buf, r[4] + off, fmt, number(argv[5]))
        if argv[4] != "hcrc":
            put(buf, r[4] + 36, "<I", crc32c(bytes(buf[r[4]:r[4] + 36])))
        fix_digest(buf)
    elif cmd == "flip":
        buf[number(argv[3])] ^= 1
    else:
        print(__doc__, file=sys.stderr)
        return 2
    with open(path, "wb") as f:
        f.write(buf)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
