#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# zstd_windows.py TRACE [grow|tight] - the window size of every zstd frame in a heaplens trace,
# in order, one per line (bytes; "stored" after those of frames of one raw block: the writer's
# own first ones, and zstd's where nothing compressed); with grow or tight, on one line, and whether they follow the writer's rule for
# tests/programs/trace_window (status 1 and the reason when not). A trace is a 16-byte file
# header, then chunks: a 16-byte header (magic "HLCK", compressed size, raw size, checksum;
# src/common/format.h) and a piece of one zstd stream, whose frames and blocks are walked here
# across the pieces: a frame may start anywhere a block could.
import struct
import sys

ZSTD_MAGIC = 0xFD2FB528
CHUNK_MAGIC = 0x4B434C48


def pieces(data):
    off = 16
    while off + 16 <= len(data):
        magic, stored, _raw, _sum = struct.unpack_from("<IIII", data, off)
        if magic != CHUNK_MAGIC or off + 16 + stored > len(data):
            raise SystemExit("zstd_windows: no chunk at offset %d" % off)
        yield data[off + 16:off + 16 + stored]
        off += 16 + stored
    if off != len(data):
        raise SystemExit("zstd_windows: %d bytes after the last chunk" % (len(data) - off))


def frames(data):
    """(window, is_stored) of each frame: stored when its one block is raw and the last."""
    stream = b"".join(pieces(data))
    at, out = 0, []
    while at < len(stream):
        if at + 6 > len(stream) or struct.unpack_from("<I", stream, at)[0] != ZSTD_MAGIC:
            raise SystemExit("zstd_windows: no frame at stream offset %d" % at)
        fhd = stream[at + 4]
        if fhd & 0x20:  # single segment: the content size is the window
            raise SystemExit("zstd_windows: a single-segment frame at stream offset %d" % at)
        wd = stream[at + 5]
        base = 1 << (10 + (wd >> 3))
        at += 6 + (0, 1, 2, 4)[fhd & 3] + (0, 2, 4, 8)[fhd >> 6]
        blocks, raw_only = 0, True
        while at < len(stream):  # a trace cut short ends inside its last frame
            h = stream[at] | stream[at + 1] << 8 | stream[at + 2] << 16
            kind, size = (h >> 1) & 3, h >> 3
            at += 3 + (1 if kind == 1 else size)
            blocks += 1
            raw_only = raw_only and kind == 0
            if h & 1:
                break
        at += 4 if fhd & 4 else 0
        out.append((base + (base >> 3) * (wd & 7), blocks == 1 and raw_only))
    return out


def windows(data):
    """The windows of the frames after the writer's stored ones, which come first. (Later, zstd
    writes a frame of one raw block itself when its bytes do not compress.)"""
    fs = frames(data)
    n = 0
    while n < len(fs) and fs[n][1]:
        n += 1
    return [w for w, _ in fs[n:]]


LONG = {1 << 20, 2 << 20, 4 << 20, 8 << 20}  # the writer's long windows
SMALL = 128 << 10  # the first frame's, and the exit scan's once the long window is given back


def check(w, kind):
    """'' when the windows w follow the writer's rule for a program that grows to 416 MiB
    (kind 'grow': each larger than the one before, ending at 4 MiB, a 64th of the program) or
    that has no room for the larger window at the end (kind 'tight': the last long frame takes
    the window before it again); else what is wrong. Either way the trace ends with a small
    frame: the exit scan's records, written after the long window was given back. Which sizes
    come between depends on when chunks end: the writer's time."""
    if len(w) < 4 or w[0] != SMALL:
        return "expected a 128 KiB first frame and two long ones at least"
    if w[-1] != SMALL:
        return "expected the exit scan's records in a last frame of 128 KiB"
    long = w[1:-1]
    if any(x not in LONG for x in long):
        return "a long window that is not 1, 2, 4 or 8 MiB"
    if long[0] > 1 << 20:
        return "the first long window is larger than a 96 MiB program calls for"
    if kind == "grow":
        if any(b <= a for a, b in zip(long, long[1:])) or long[-1] != 4 << 20:
            return "expected larger windows one after the other, up to 4 MiB"
    else:
        if any(b < a for a, b in zip(long, long[1:])) or long[-1] != long[-2] or long[-1] >= 4 << 20:
            return "expected the last long frame to keep the window before it, below 4 MiB"
    return ""


if __name__ == "__main__":
    data = open(sys.argv[1], "rb").read()
    if len(sys.argv) > 2:
        ws = windows(data)
        why = check(ws, sys.argv[2])
        print(" ".join(str(x) for x in ws) + (": " + why if why else ""))
        sys.exit(1 if why else 0)
    for w, is_stored in frames(data):
        print(w, "stored" if is_stored else "")
