#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# trace_stats.py - what a heaplens trace is made of: records and raw bytes per record kind,
# chunks, and the compressed size. Answers "why is this trace this big" and checks, on its
# own, that a trace follows src/common/format.h (version 3): every chunk's checksum, every
# FREE's site defined before it.  Usage: bench/trace_stats.py TRACE.hl  (needs libzstd)
import collections
import ctypes
import ctypes.util
import struct
import sys

MASK64 = (1 << 64) - 1


def checksum32(data):
    h = 0x9E3779B97F4A7C15
    n = len(data)
    full = n - n % 8
    for (w,) in struct.iter_unpack("<Q", data[:full]):
        h = ((h ^ w) * 0xFF51AFD7ED558CCD) & MASK64
        h ^= h >> 29
    tail = int.from_bytes(data[full:], "little")
    h = (((h ^ n) ^ tail) * 0xFF51AFD7ED558CCD) & MASK64
    h ^= h >> 29
    h = (h * 0xC4CEB9FE1A85EC53) & MASK64
    return (h ^ (h >> 32)) & 0xFFFFFFFF


class Stream:
    """One zstd decompression stream over the chunks' payloads (libzstd through ctypes: the
    zstd command cannot hand out the tail of a frame that never ends)."""

    class Buf(ctypes.Structure):
        _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]

    def __init__(self):
        self.z = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
        self.z.ZSTD_createDStream.restype = ctypes.c_void_p
        self.z.ZSTD_decompressStream.restype = ctypes.c_size_t
        self.z.ZSTD_decompressStream.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.z.ZSTD_isError.argtypes = [ctypes.c_size_t]
        self.z.ZSTD_DCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self.d = self.z.ZSTD_createDStream()
        self.z.ZSTD_DCtx_setParameter(self.d, 100, 27)  # ZSTD_d_windowLogMax

    def decode(self, stored, raw_len):
        src = ctypes.create_string_buffer(bytes(stored), len(stored))
        dst = ctypes.create_string_buffer(raw_len + 1)
        inb = Stream.Buf(ctypes.cast(src, ctypes.c_void_p), len(stored), 0)
        outb = Stream.Buf(ctypes.cast(dst, ctypes.c_void_p), raw_len + 1, 0)
        while inb.pos < inb.size or outb.pos < raw_len:
            before = (inb.pos, outb.pos)
            r = self.z.ZSTD_decompressStream(self.d, ctypes.byref(outb), ctypes.byref(inb))
            if self.z.ZSTD_isError(r) or (inb.pos, outb.pos) == before:
                break
        return dst.raw[:outb.pos]


def chunks(path):
    """(offset, raw bytes) of every chunk, then (file size, None)."""
    data = open(path, "rb").read()
    if data[:8] != b"HLTRACE\0" or struct.unpack_from("<I", data, 8)[0] != 3:
        raise SystemExit("trace_stats: %s is not a version 3 heaplens trace" % path)
    off, stream = 16, Stream()
    while off + 16 <= len(data):
        magic, stored, raw, ck = struct.unpack_from("<IIII", data, off)
        if magic != 0x4B434C48 or off + 16 + stored > len(data):
            break
        piece = stream.decode(data[off + 16:off + 16 + stored], raw)
        if len(piece) != raw or checksum32(piece) != ck:
            raise SystemExit("trace_stats: chunk at offset %d fails its checksum" % off)
        yield off, piece
        off += 16 + stored
    yield off, None


class Dec:
    def __init__(self, b):
        self.b, self.p = b, 0

    def u(self):
        v = shift = 0
        while True:
            c = self.b[self.p]
            self.p += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return v

    def s(self):
        v = self.u()
        return (v >> 1) ^ -(v & 1)

    def string(self):
        n = self.u()
        self.p += n


# Fields after the tag byte, as format.h lists them: u = varint, s = signed, t = string,
# m = module segments.
LAYOUT = {1: "uuuuuutu" "t", 2: "uuttm", 3: "u", 4: "uu", 5: "sus", 8: "uuuuu", 9: "uu",
          10: "suuuu", 12: "uuuu", 13: "suu", 14: "usuuuu", 15: "suu", 16: "st", 17: "ust",
          18: "s", 19: "u", 20: "uuuu"}
LAYOUT[1] = "uuuuuuttu"
NAMES = {1: "INFO", 2: "MODULE", 3: "MODULE_GONE", 4: "THREAD", 5: "STACK", 8: "MMAP",
         9: "MUNMAP", 10: "SAMPLE", 11: "ERROR", 12: "INHERIT", 13: "SCAN", 14: "VERDICT",
         15: "END", 16: "EXEC", 17: "THREAD_NAME", 18: "TIME", 19: "SWITCH",
         20: "FREE_EXPLICIT", 0x40: "ALLOC", 0x60: "FREE", 0x80: "FREE_TEMP"}


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: trace_stats.py TRACE.hl")
    count, size = collections.Counter(), collections.Counter()
    sites, nchunks, file_size = 0, 0, 0
    for off, raw in chunks(sys.argv[1]):
        if raw is None:
            file_size = off
            break
        nchunks += 1
        d = Dec(raw)
        while d.p < len(raw):
            start, tag = d.p, raw[d.p]
            d.p += 1
            kind = tag & ~31 if 0x40 <= tag < 0xA0 else tag
            if kind == 0x40:
                d.u(); d.u()
            elif kind == 0x80:
                pass
            elif kind == 0x60:
                if d.u() > sites:
                    raise SystemExit("trace_stats: FREE of undefined site at chunk %d" % off)
            elif tag == 11:
                d.u(); d.u(); d.s(); d.u(); d.u(); d.u()
                if d.u():
                    [d.u() for _ in range(4)]
            elif tag in LAYOUT:
                for f in LAYOUT[tag]:
                    if f == "u":
                        d.u()
                    elif f == "s":
                        d.s()
                    elif f == "t":
                        d.string()
                    else:
                        [d.u() for _ in range(3 * d.u())]
            else:
                raise SystemExit("trace_stats: unknown record tag %d in chunk at %d" % (tag, off))
            if kind in (0x40, 12):
                sites += 1  # an upper bound: distinct pairs are what the reader numbers
            count[kind] += 1
            size[kind] += d.p - start
    total = sum(size.values())
    print("%s: %d bytes in %d chunks, %d raw bytes (%.1fx)" % (sys.argv[1], file_size, nchunks,
                                                               total, total / max(file_size, 1)))
    for kind in sorted(count, key=lambda k: -size[k]):
        print("  %-14s %10d records %12d raw bytes" % (NAMES.get(kind, kind), count[kind], size[kind]))


if __name__ == "__main__":
    main()
