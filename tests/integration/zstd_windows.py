#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# zstd_windows.py TRACE - the window size of every zstd frame in a heaplens trace, in order, one
# per line (bytes). A trace is a 16-byte file header, then chunks: a 16-byte header (magic
# "HLCK", compressed size, raw size, checksum; src/common/format.h) and a piece of one zstd
# stream. A frame starts at the start of a chunk's piece; its header gives the window.
import struct
import sys

ZSTD_MAGIC = 0xFD2FB528
CHUNK_MAGIC = 0x4B434C48


def windows(data):
    off, out = 16, []
    while off + 16 <= len(data):
        magic, stored, _raw, _sum = struct.unpack_from("<IIII", data, off)
        if magic != CHUNK_MAGIC or off + 16 + stored > len(data):
            raise SystemExit("zstd_windows: no chunk at offset %d" % off)
        piece = data[off + 16:off + 16 + stored]
        # A piece that goes on with a frame starts with a block header, which never reads as
        # the magic (its size field would exceed zstd's largest block).
        if len(piece) >= 6 and struct.unpack_from("<I", piece)[0] == ZSTD_MAGIC:
            fhd = piece[4]
            if fhd & 0x20:  # single segment: the content size is the window
                raise SystemExit("zstd_windows: a single-segment frame at offset %d" % off)
            wd = piece[5]
            base = 1 << (10 + (wd >> 3))
            out.append(base + (base >> 3) * (wd & 7))
        off += 16 + stored
    if off != len(data):
        raise SystemExit("zstd_windows: %d bytes after the last chunk" % (len(data) - off))
    return out


if __name__ == "__main__":
    for w in windows(open(sys.argv[1], "rb").read()):
        print(w)
