#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# hostile.sh BUILD_DIR - the analyzer under hostile input: traces written record by record
# (python, framed by BUILD_DIR/fuzz/pack with valid checksums, so the damage reaches the decoder
# and the model) with times past 292 years, sizes past 2^63, a thread index of 2^30-1 and of
# 2^24-1, a 300 KB module path in every frame, bytes that are not UTF-8, 20,000 allocator
# samples of 64 arenas; and the CLI's answers
# to bad input (diff of a missing trace, diff --json -, html of what is not a report, a bad
# --filter without a view, HEAPLENS_DEBUG_SCAN=0). Undefined behaviour is looked for with the
# ASan+UBSan build (BUILD_DIR/asan, make asan-build); memory and time with the plain one.
# One line per check, "PASS name" or "FAIL name: reason"; the last line is "N passed, N failed".
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
SAN=$BUILD/asan/heaplens
PACK=$BUILD/fuzz/pack
PROGS=$BUILD/programs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-hostile.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=60
SAN_EXIT=86
export ASAN_OPTIONS="exitcode=$SAN_EXIT:detect_leaks=1"
export UBSAN_OPTIONS="exitcode=$SAN_EXIT:halt_on_error=1:print_stacktrace=1"
SAN_RE='ERROR: (Address|Leak)Sanitizer|runtime error:'
# What one damaged trace may cost the analyzer (the traces here are a few KB).
MAX_RSS_KB=$((200 * 1024))
MAX_SECONDS=10
MAX_OUTPUT=$((8 << 20))

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }

for f in "$HL" "$SAN" "$PACK"; do
    [ -x "$f" ] || { fail setup "$f missing (make all asan-build $BUILD/fuzz/pack)"; finish; }
done

# The traces, as records: each a file of chunks (varint length, raw records), then packed.
python3 - "$WORK" <<'EOF' || fail setup "the hostile traces could not be written"
import sys
W = sys.argv[1]
M64 = (1 << 64) - 1

def v(x):
    x &= M64
    out = bytearray()
    while True:
        b = x & 0x7F
        x >>= 7
        if x:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def sv(x):  # zigzag
    x &= M64
    neg = x >> 63
    return v(((x << 1) & M64) ^ (M64 if neg else 0))

def s(b):
    return v(len(b)) + b

def info(exe=b"/bin/prog", argv=b"prog\0"):
    return bytes([1]) + v(42) + v(1) + v(0) + v(32) + v(8) + v(1) + s(exe) + s(argv) + v(0)

def module(mid, bias, path):
    return bytes([2]) + v(mid) + v(bias) + s(path) + s(b"") + v(1) + v(0) + v(0x100000) + v(5)

class Stacks:  # STACK ids and ips are deltas within a chunk
    def __init__(self):
        self.id = self.ip = 0
    def rec(self, sid, parent, ip):
        r = bytes([5]) + sv(sid - self.id) + v(sid - parent) + sv(ip - self.ip)
        self.id, self.ip = sid, ip
        return r

switch = lambda t: bytes([19]) + v(t)
thread = lambda i, tid: bytes([4]) + v(i) + v(tid)
time = lambda dt: bytes([18]) + sv(dt)
alloc = lambda size, stack: bytes([0x40 | 1]) + v(size) + v(stack)
end = lambda dt: bytes([15]) + sv(dt) + v(1) + v(0)

def write(name, *chunks):
    open("%s/%s.rec" % (W, name), "wb").write(b"".join(v(len(c)) + c for c in chunks))

st = Stacks()
write("time_overflow", info() + st.rec(1, 0, 0x1000) + switch(1) + time(1 << 62) + time(1 << 62)
      + alloc(16, 1) + end(1))
st = Stacks()
base = info() + st.rec(1, 0, 0x1000) + switch(1) + time(10)
write("huge_size", base + alloc((1 << 64) - 2, 1) + end(10))
write("small", base + alloc(100, 1) + end(10))
st = Stacks()
write("thread_2p30", info() + st.rec(1, 0, 0x1000) + switch((1 << 30) - 1) + time(10)
      + alloc(16, 1) + end(10))
st = Stacks()
write("thread_2p24", info() + st.rec(1, 0, 0x1000) + thread((1 << 24) - 1, 7)
      + switch((1 << 24) - 1) + time(10) + alloc(16, 1) + end(10))
st = Stacks()
long_path = b"/" + b"d" * (300 << 10) + b"/libhostile.so"
recs = info() + module(1, 0x400000, long_path) + switch(1) + time(10)
for i in range(1, 2001):  # 2000 stacks of one frame each, in the module with the long path
    recs += st.rec(i, 0, 0x400100 + 16 * i) + alloc(i, i)
write("long_path", recs + end(20))
st = Stacks()
# 20,000 allocator samples of 64 arenas each (the report keeps 2048 at most), values past 2^63
def astats(dt, value, arena_value):
    return (bytes([23]) + sv(dt) + v(1) + v((1 << 11) - 1) + v(11) + v(value) * 11 + v(64) + v(64)
            + v(4) + v(arena_value) * 256)
st = Stacks()
head = info() + st.rec(1, 0, 0x1000) + switch(1) + time(10) + alloc(16, 1)
chunks = []
for c in range(4):
    chunks.append((head if c == 0 else b"") + b"".join(astats(1000, M64 if i % 7 == 0 else i, M64 if i % 5 == 0 else 3)
                                                       for i in range(5000)))
chunks[-1] += end(10)
write("alloc_stats_many", *chunks)
st = Stacks()
write("not_utf8", info(exe=b"/tmp/\xff\xfeprog", argv=b"prog\0\xc3(\0--x=\x80\0")
      + st.rec(1, 0, 0x1000) + switch(1) + time(10) + alloc(16, 1) + end(10))
EOF
for r in "$WORK"/*.rec; do
    "$PACK" "$r" "${r%.rec}.hl" || fail setup "pack $(basename "$r")"
done

# run NAME BIN ARGS...: stdout, stderr in $WORK/NAME.{out,err}; status in ST; RSS (KB) and
# seconds in RSS, SECS.
run() {
    local name=$1
    shift
    /usr/bin/time -f "%M %e" -o "$WORK/$name.time" timeout $TIMEOUT "$@" \
        >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null
    ST=$?
    RSS=0 SECS=0
    # (after a non-zero status, /usr/bin/time says so on a line of its own before the figures)
    read -r RSS SECS < <(grep -E '^[0-9]+ [0-9.]+$' "$WORK/$name.time" | tail -1)
}
no_ub() { ! grep -qE "$SAN_RE" "$WORK/$1.err" && [ "$ST" -ne $SAN_EXIT ]; }
ub_says() { grep -m1 -E "$SAN_RE" "$WORK/$1.err" | cut -c1-200; }
# refused NAME PATTERN: status 1, and stderr is one line "heaplens: ..." matching PATTERN.
refused() {
    [ "$ST" -eq 1 ] && [ "$(wc -l <"$WORK/$1.err")" -eq 1 ] && grep -qE "^heaplens: .*$2" "$WORK/$1.err"
}
within_bounds() { [ "${RSS:-0}" -le $MAX_RSS_KB ] && awk -v s="${SECS:-0}" -v m=$MAX_SECONDS 'BEGIN { exit !(s <= m) }'; }

# --- 13: numbers past their type: no undefined behaviour -----------------------------------------
run time_overflow "$SAN" report "$WORK/time_overflow.hl"
if ! no_ub time_overflow; then fail "time past 292 years" "$(ub_says time_overflow)"
elif refused time_overflow "corrupt trace: .*a time beyond 292 years"; then pass "time past 292 years: corrupt, in one line"
else fail "time past 292 years" "status $ST: $(head -3 "$WORK/time_overflow.err")"; fi

run huge_report "$SAN" report --summary --top 3 --timeline --threads --json "$WORK/huge.json" \
    --pprof "$WORK/huge.pb.gz" --massif "$WORK/huge.massif" --flamegraph "$WORK/huge.svg" \
    "$WORK/huge_size.hl"
if ! no_ub huge_report; then fail "a block of 2^64-2 bytes: report and views" "$(ub_says huge_report)"
elif [ "$ST" -eq 0 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["summary"]["bytes_allocated"] == (1 << 64) - 2' "$WORK/huge.json" 2>/dev/null; then
    pass "a block of 2^64-2 bytes: report and views count it, no signed overflow"
else fail "a block of 2^64-2 bytes: report and views" "status $ST: $(head -c 300 "$WORK/huge_report.err")"; fi

run huge_diff "$SAN" diff --json "$WORK/diff.json" "$WORK/small.hl" "$WORK/huge_size.hl"
if ! no_ub huge_diff; then fail "diff of 100 B against 2^64-2 B" "$(ub_says huge_diff)"
elif [ "$ST" -eq 0 ] && python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["diff"]["sites"]
assert any(x["bytes"]["delta"] == (1 << 63) - 1 for x in s), s' "$WORK/diff.json" 2>/dev/null; then
    pass "diff of 100 B against 2^64-2 B: the change held at the largest signed number"
else fail "diff of 100 B against 2^64-2 B" "status $ST: $(head -c 300 "$WORK/huge_diff.err")"; fi

# --- 14: memory bounded by what the trace holds ------------------------------------------------
run thread_2p30 "$HL" report "$WORK/thread_2p30.hl"
if refused thread_2p30 "corrupt trace: .*a thread index beyond 16777215" && within_bounds; then
    pass "thread index 2^30-1: corrupt, in one line (${RSS} KB, ${SECS} s)"
else fail "thread index 2^30-1" "status $ST, ${RSS} KB, ${SECS} s: $(head -3 "$WORK/thread_2p30.err")"; fi
run thread_2p24 "$HL" report --threads --json "$WORK/t24.json" "$WORK/thread_2p24.hl"
if [ "$ST" -eq 0 ] && within_bounds && grep -q '"index": 16777215' "$WORK/t24.json"; then
    pass "thread index 2^24-1: reported (${RSS} KB, ${SECS} s)"
else fail "thread index 2^24-1" "status $ST, ${RSS} KB, ${SECS} s: $(head -3 "$WORK/thread_2p24.err")"; fi
run thread_2p24_san "$SAN" report --threads --json /dev/null "$WORK/thread_2p24.hl"
no_ub thread_2p24_san && pass "thread index 2^24-1: no sanitizer finding" ||
    fail "thread index 2^24-1 (ASan+UBSan)" "$(ub_says thread_2p24_san)"

run astats "$SAN" report --timeline --json "$WORK/astats.json" --html "$WORK/astats.html" "$WORK/alloc_stats_many.hl"
if ! no_ub astats; then fail "20,000 allocator samples of 64 arenas" "$(ub_says astats)"
elif [ "$ST" -eq 0 ] && python3 -c '
import json, sys
S = json.load(open(sys.argv[1]))["allocator_stats"]
assert S["records"] == 20000 and 1024 <= len(S["samples"]) <= 2048, (S["records"], len(S["samples"]))
assert len(S["at_peak"]["arena_list"]) == 64 and S["at_end"]["vm_rss"] == 4999' "$WORK/astats.json" 2>/dev/null &&
   grep -q "at the heap.s peak" "$WORK/astats.out"; then
    pass "20,000 allocator samples of 64 arenas, values past 2^63: kept to 2048, no sanitizer finding"
else fail "20,000 allocator samples of 64 arenas" "status $ST: $(head -c 300 "$WORK/astats.err")"; fi
run astats_plain "$HL" report --timeline --json /dev/null "$WORK/alloc_stats_many.hl"
if [ "$ST" -eq 0 ] && within_bounds; then pass "20,000 allocator samples: ${RSS} KB, ${SECS} s"
else fail "20,000 allocator samples: bounds" "status $ST, ${RSS} KB, ${SECS} s"; fi

# --- 15: strings capped: a 300 KB module path in 2000 frames -----------------------------------
run long_diff "$HL" diff --json "$WORK/long.json" "$WORK/long_path.hl" "$WORK/long_path.hl"
size=$(stat -c %s "$WORK/long.json" 2>/dev/null || echo 0)
if [ "$ST" -eq 0 ] && within_bounds && [ "$size" -gt 0 ] && [ "$size" -le $MAX_OUTPUT ]; then
    pass "300 KB module path in 2000 frames: diff --json is $((size >> 10)) KB (${RSS} KB, ${SECS} s)"
else fail "300 KB module path: diff --json" "status $ST, $size bytes, ${RSS} KB, ${SECS} s"; fi
run long_report "$HL" report -q --json "$WORK/longr.json" --html "$WORK/longr.html" "$WORK/long_path.hl"
size=$(( $(stat -c %s "$WORK/longr.json" 2>/dev/null || echo 0) + $(stat -c %s "$WORK/longr.html" 2>/dev/null || echo 0) ))
if [ "$ST" -eq 0 ] && within_bounds && [ "$size" -le $((2 * MAX_OUTPUT)) ] &&
   grep -q 'bytes cut\]' "$WORK/longr.json"; then
    pass "300 KB module path: report --json and --html $((size >> 10)) KB, the path says what was cut"
else fail "300 KB module path: report" "status $ST, $size bytes, ${RSS} KB, ${SECS} s"; fi

# --- 16: bad input gets one clear line; JSON is JSON -------------------------------------------
run not_utf8 "$SAN" report -q --json "$WORK/u.json" --sarif "$WORK/u.sarif" "$WORK/not_utf8.hl"
if no_ub not_utf8 && [ "$ST" -eq 0 ] && python3 -c '
import json, sys
for f in sys.argv[1:]:
    d = json.loads(open(f, "rb").read().decode("utf-8"))  # strict: no byte that is not UTF-8
r = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert r["process"]["exe"] == "/tmp/\\xFF\\xFEprog", r["process"]["exe"]
assert r["process"]["argv"] == ["prog", "\\xC3(", "--x=\\x80"], r["process"]["argv"]' "$WORK/u.json" "$WORK/u.sarif" 2>/dev/null; then
    pass "a path and arguments that are not UTF-8: JSON and SARIF strict UTF-8, bytes shown as \\xHH"
else fail "not UTF-8" "status $ST: $(head -c 300 "$WORK/not_utf8.err")"; fi

run diff_missing "$SAN" diff "$WORK/no-such.hl" "$WORK/small.hl"
refused diff_missing "no-such.hl" && pass "diff of a missing trace: one line, status 1" ||
    fail "diff of a missing trace" "status $ST: $(head -3 "$WORK/diff_missing.err")"
run diff_corrupt "$SAN" diff "$WORK/small.hl" "$WORK/thread_2p30.hl"
refused diff_corrupt "corrupt trace" && pass "diff with a corrupt trace: one line, status 1" ||
    fail "diff with a corrupt trace" "status $ST: $(head -3 "$WORK/diff_corrupt.err")"
run diff_stdout "$SAN" diff --json - "$WORK/small.hl" "$WORK/huge_size.hl"
if no_ub diff_stdout && [ "$ST" -eq 0 ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/diff_stdout.out" 2>/dev/null; then
    pass "diff --json -: stdout is the JSON document alone"
else fail "diff --json -" "status $ST: $(head -c 200 "$WORK/diff_stdout.out")"; fi

run html_passwd "$SAN" html /etc/passwd -o "$WORK/passwd.html"
if refused html_passwd "not a JSON report" && [ ! -e "$WORK/passwd.html" ]; then
    pass "html /etc/passwd: one line, no page written"
else fail "html /etc/passwd" "status $ST, page $( [ -e "$WORK/passwd.html" ] && echo written || echo absent): $(head -3 "$WORK/html_passwd.err")"; fi

run bad_filter "$SAN" report --filter '(' "$WORK/small.hl"
refused bad_filter "filter" && pass "report --filter '(' without a view: one line, status 1" ||
    fail "report --filter '(' without a view" "status $ST: $(head -3 "$WORK/bad_filter.err")"

if [ -x "$PROGS/reach_global" ]; then
    (cd "$WORK" && HEAPLENS_DEBUG_SCAN=0 timeout $TIMEOUT "$HL" run -q -o "$WORK/dbg0.hl" -- \
        "$PROGS/reach_global" >/dev/null 2>"$WORK/dbg0.err" </dev/null)
    (cd "$WORK" && HEAPLENS_DEBUG_SCAN=1 timeout $TIMEOUT "$HL" run -q -o "$WORK/dbg1.hl" -- \
        "$PROGS/reach_global" >/dev/null 2>"$WORK/dbg1.err" </dev/null)
    if ! grep -q "found at" "$WORK/dbg0.err" && grep -q "found at" "$WORK/dbg1.err"; then
        pass "HEAPLENS_DEBUG_SCAN=0 is off (=1 says where each reachable block was found)"
    else
        fail "HEAPLENS_DEBUG_SCAN" "=0: $(grep -c 'found at' "$WORK/dbg0.err") lines, =1: $(grep -c 'found at' "$WORK/dbg1.err")"
    fi
else
    fail "HEAPLENS_DEBUG_SCAN" "$PROGS/reach_global missing"
fi

finish
