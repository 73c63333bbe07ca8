#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# trace_fields.py - what each field of ALLOC and FREE records costs in a heaplens trace.
#
# Decodes a trace (format v2, src/common/format.h), re-encodes its ALLOC and FREE records with
# some fields left out, compresses each variant in 1 MiB pieces with the `zstd` command at the
# agent's level (1), and prints the sizes. Answers "why is this trace bigger than heaptrack's":
# heaptrack's trace keeps neither addresses nor which block a free releases, nor a time per
# event. Usage: bench/trace_fields.py TRACE.hl   (needs python3 and the zstd command)
import struct
import subprocess
import sys


def chunks(path):
    data = open(path, "rb").read()
    off = 16
    while off + 12 <= len(data):
        magic, stored, _raw = struct.unpack_from("<III", data, off)
        if magic != 0x4B434C48:
            break
        comp = data[off + 12:off + 12 + stored]
        yield subprocess.run(["zstd", "-d", "-c", "-q"], input=comp, capture_output=True,
                             check=True).stdout
        off += 12 + stored


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


def alloc_free_records(path):
    """(tag, fields) of every ALLOC (6) and FREE (7) record, fields as in format.h."""
    for raw in chunks(path):
        d = Dec(raw)
        while d.p < len(raw):
            tag = raw[d.p]
            d.p += 1
            if tag == 1:
                [d.u() for _ in range(6)]; d.string(); d.string(); d.u()
            elif tag == 2:
                d.u(); d.u(); d.string(); d.string()
                [d.u() for _ in range(3 * d.u())]
            elif tag in (3,):
                d.u()
            elif tag == 4:
                d.u(); d.u()
            elif tag == 5:
                d.s(); d.u(); d.s()
            elif tag == 6:
                yield 6, (d.u(), d.s(), d.s(), d.u(), d.u(), d.u())
            elif tag == 7:
                yield 7, (d.u(), d.s(), d.u(), d.s(), d.u())
            elif tag == 8:
                d.u(); d.s(); [d.u() for _ in range(5)]
            elif tag == 9:
                d.u(); d.s(); d.u(); d.u()
            elif tag == 10:
                d.s(); [d.u() for _ in range(4)]
            elif tag == 11:
                d.u(); d.u(); d.s(); [d.u() for _ in range(3)]
                if d.u():
                    [d.u() for _ in range(6)]
            elif tag == 12:
                [d.u() for _ in range(6)]
            elif tag == 13:
                d.s(); d.u(); d.u()
            elif tag == 14:
                [d.u() for _ in range(5)]
            elif tag == 15:
                d.s(); d.u(); d.u()
            elif tag == 16:
                d.s(); d.string()
            elif tag == 17:
                d.u(); d.s(); d.string()
            else:
                raise SystemExit("trace_fields: unknown record tag %d" % tag)


def put_u(v, out):
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def put_s(v, out):
    put_u((v << 1) ^ (v >> 63) if v < 0 else v << 1, out)


def compressed(buf):
    total = 0
    for i in range(0, len(buf), 1 << 20):
        total += len(subprocess.run(["zstd", "-1", "-c", "-q"], input=bytes(buf[i:i + (1 << 20)]),
                                    capture_output=True, check=True).stdout)
    return total


def encode(recs, times, addrs, blocks):
    out = bytearray()
    for tag, f in recs:
        out.append(tag)
        if tag == 6:
            thread, dt, daddr, size, stack, fn = f
            put_u(thread, out)
            if times:
                put_s(dt, out)
            if addrs:
                put_s(daddr, out)
            put_u(size, out); put_u(stack, out); put_u(fn, out)
        else:
            thread, dt, owner, back, fn = f
            put_u(thread, out)
            if times:
                put_s(dt, out)
            put_u(owner, out)
            if blocks:
                put_s(back, out)
            put_u(fn, out)
    return out


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: trace_fields.py TRACE.hl")
    recs = list(alloc_free_records(sys.argv[1]))
    print("%d ALLOC/FREE records" % len(recs))
    print("%-46s %12s %12s" % ("ALLOC and FREE records", "raw bytes", "zstd -1"))
    for label, kw in (("as written (time, address, block released)", (1, 1, 1)),
                      ("without times", (0, 1, 1)),
                      ("without addresses", (1, 0, 1)),
                      ("without the block a free releases", (1, 1, 0)),
                      ("without addresses and blocks", (1, 0, 0)),
                      ("none of the three (what heaptrack keeps)", (0, 0, 0))):
        buf = encode(recs, *kw)
        print("%-46s %12d %12d" % (label, len(buf), compressed(buf)), flush=True)


if __name__ == "__main__":
    main()
