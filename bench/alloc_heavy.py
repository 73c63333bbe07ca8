# SPDX-License-Identifier: MIT
# alloc_heavy.py - benchmark workload: dict/list/string churn in CPython (~1-2 s natively).
# CPython serves objects up to 512 bytes from its own arenas (pymalloc), so the script also
# makes medium strings, lists and dicts that go to malloc/realloc: ~1.5M allocation calls.
# Usage: python3 alloc_heavy.py [ROUNDS] (default 10).
import sys


def one_round(r):
    table = {}
    for i in range(40000):
        key = "key-%d-%d" % (i, r)
        # a 500-2500-byte string and a list grown past 64 items: both live in malloc memory
        table[key] = ["v" * (500 + (i * 37) % 2000), list(range(i % 150)), {"n": i, "k": key}]
    total = 0
    for key, val in table.items():
        total += len(val[0]) + len(val[1]) + len(val[2]["k"])
    big = [("x" * (i % 900)) + str(i) for i in range(40000)]
    joined = ",".join(big)
    parts = joined.split(",")
    total += len(parts)
    groups = {}
    for i, p in enumerate(parts):
        groups.setdefault(i % 97, []).append(p[-700:])
    total += sum(len(g) for g in groups.values())
    words = {}
    for p in parts[::3]:
        words[p[:40] + str(len(p))] = p.upper()
    total += len(words)
    del table, big, joined, parts, groups, words
    return total


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    total = 0
    for r in range(rounds):
        total += one_round(r)
    print("alloc_heavy: %d rounds, checksum %d" % (rounds, total))


main()
