#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# m32.sh BUILD_DIR - 32-bit programs on a 64-bit host: the 32-bit agent (built when gcc -m32 and
# a 32-bit libzstd are installed) traces them under `heaplens run`, the 64-bit analyzer reports
# their traces, a 64-bit collector takes their stream, `heaplens shell` talks to them, and a
# 64-bit shell's 32-bit children are traced beside it. The verdicts are those of the same
# programs built 64-bit wherever the sizes do not hold pointers.
# Without the 32-bit toolchain it says so in one line and checks nothing.
# One line per check, "PASS name" or "FAIL name: reason"; the last line is "N passed, N failed".
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HL=$BUILD/heaplens
PROGS=$BUILD/programs
PASSED=0
FAILED=0
pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }
expect() { # expect NAME WANT GOT
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected '$2', got '$3'"; fi
}

if [ ! -e "$BUILD/agents/i686/libheaplens.so" ]; then
    echo "SKIP m32: no 32-bit agent in $BUILD (install gcc-multilib and libzstd-dev:i386, then make)"
    finish
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-m32.XXXXXX")
chmod 700 "$WORK"
SERVERS=()
cleanup() {
    local p
    for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK" || exit 1

# The test programs, built 32-bit as the Makefile builds them 64-bit.
for p in alloc_basic threads_alloc relink; do
    gcc -m32 -O2 -g -fno-omit-frame-pointer -fno-inline-small-functions -Wno-unused-result \
        -I"$ROOT/tests/programs" -o "$WORK/${p}32" "$ROOT/tests/programs/$p.c" -pthread -ldl 2>"$WORK/cc.err" ||
        { fail "build ${p} -m32" "$(head -c 300 "$WORK/cc.err")"; finish; }
done
[ -x "$PROGS/alloc_basic" ] && [ -x "$PROGS/threads_alloc" ] || { fail setup "build the test programs first"; finish; }

# field JSON EXPR: one value of a report --json, by a Python expression over j
field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }
LEAKS='"%d/%d %d/%d" % (j["leaks"]["definitely_lost"]["bytes"], j["leaks"]["definitely_lost"]["blocks"], j["leaks"]["indirectly_lost"]["bytes"], j["leaks"]["indirectly_lost"]["blocks"])'

for p in alloc_basic threads_alloc; do
    "$WORK/${p}32" >"$p.native.out" 2>&1
    nst=$?
    "$HL" run -q -o "$p.32.hl" -- "$WORK/${p}32" >"$p.out" 2>"$p.err"
    st=$?
    [ "$st" = "$nst" ] && cmp -s "$p.out" "$p.native.out" && [ ! -s "$p.err" ] &&
        pass "$p -m32: traced, its output and exit status ($st) as natively, nothing more said" ||
        fail "$p -m32: unharmed" "status $st (natively $nst); $(head -c 300 "$p.err")"
    "$HL" report -q --json "$p.32.json" "$p.32.hl" 2>"$p.rep.err"
    "$HL" run -q -o "$p.64.hl" --json "$p.64.json" -- "$PROGS/$p" >/dev/null 2>&1
    expect "$p -m32: the trace says 4-byte words, little-endian" "4 little" \
        "$(field "$p.32.json" 'j["process"]["word_size"], j["process"]["byte_order"]' | tr -d "(),'")"
    expect "$p -m32: complete" True "$(field "$p.32.json" 'j["trace_complete"]')"
    expect "$p -m32: the same leaks as the 64-bit build" "$(field "$p.64.json" "$LEAKS")" "$(field "$p.32.json" "$LEAKS")"
done
grep -q "leak_via_malloc (.*alloc_basic.c:[0-9]*)" <("$HL" report alloc_basic.32.hl 2>&1) &&
    pass "alloc_basic -m32: its leak's stack symbolized, file and line" ||
    fail "alloc_basic -m32: stack" "$("$HL" report alloc_basic.32.hl 2>&1 | grep -m3 ' at ')"

# A 64-bit shell running a 32-bit and a 64-bit program: three traces, no word from the loader.
mkdir -p mixed
"$HL" run -q -o "$WORK/mixed/t.%p.hl" -- sh -c "'$WORK/alloc_basic32' >/dev/null; '$PROGS/alloc_basic' >/dev/null; true" 2>mixed.err
st=$?
n=$(ls mixed | wc -l)
[ "$st" = 0 ] && [ "$n" = 3 ] && [ ! -s mixed.err ] &&
    pass "a 64-bit shell's 32-bit and 64-bit children: each traced by its own agent, nothing said" ||
    fail "mixed children" "status $st, $n traces: $(head -c 300 mixed.err)"
w=$(for t in mixed/*; do "$HL" report -q --json /dev/stdout "$t" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["process"]["word_size"])'; done | sort | tr '\n' ' ')
expect "mixed children: two 64-bit traces and one 32-bit" "4 8 8 " "$w"

# Through a 64-bit collector: the same report as the file trace.
mkdir -p col && chmod 700 col
"$HL" server --listen "unix:$WORK/col/s.sock" -o "$WORK/col" >col.log 2>&1 &
SERVERS+=($!)
for _ in $(seq 1 200); do grep -q "listening" col.log 2>/dev/null && break; sleep 0.02; done
"$HL" run -q --remote "unix:$WORK/col/s.sock" -- "$WORK/threads_alloc32" >/dev/null 2>remote.err
st=$?
for _ in $(seq 1 250); do ls col/heaplens.threads_alloc32.*.hl >/dev/null 2>&1 && break; sleep 0.02; done
t=$(ls col/heaplens.threads_alloc32.*.hl 2>/dev/null | head -1)
if [ "$st" = 0 ] && [ -n "$t" ]; then
    "$HL" report -q --json remote.json "$t" 2>/dev/null
    expect "threads_alloc -m32 through a 64-bit collector: the file trace's leaks" \
        "$(field threads_alloc.32.json "$LEAKS")" "$(field remote.json "$LEAKS")"
    expect "threads_alloc -m32 through a 64-bit collector: the file trace's allocations" \
        "$(field threads_alloc.32.json 'j["calls"]["malloc"]')" "$(field remote.json 'j["calls"]["malloc"]')"
else
    fail "threads_alloc -m32 through a collector" "status $st, trace '$t': $(head -c 300 remote.err)"
fi

# heaplens shell to a 32-bit process: its control socket and a live scan.
mkdir -p live
("$HL" run -q -o "$WORK/live/t.hl" -- "$WORK/relink32" "$WORK/live" >live.out 2>live.err; echo $? >live.status) &
pid=""
for _ in $(seq 1 250); do [ -s live/pid ] && pid=$(cat live/pid) && break; sleep 0.02; done
if [ -n "$pid" ]; then
    printf 'leaks\nleaks leak\n' | timeout 60 "$HL" shell "$pid" >live.sh.out 2>&1
    grep -q "definitely lost: 600 bytes in 15 blocks" live.sh.out &&
        pass "heaplens shell to a 32-bit process: a live scan, 600 bytes in 15 blocks lost" ||
        fail "shell to a 32-bit process" "$(grep -i -m5 'lost\|error' live.sh.out)"
    grep -q "^15 found lost before" live.sh.out &&
        pass "heaplens shell to a 32-bit process: leaks leak" || fail "shell -m32 leaks leak" "$(grep found live.sh.out)"
    touch live/stop
    for _ in $(seq 1 250); do [ -s live.status ] && break; sleep 0.02; done
    expect "relink -m32: its exit status under the shell" 0 "$(cat live.status 2>/dev/null)"
else
    fail "relink -m32" "no pid: $(head -c 300 live.err)"
fi

# attach to a 32-bit process: refused in one line before it is stopped; it runs on unharmed.
mkdir -p att
("$WORK/relink32" "$WORK/att" >att.out 2>&1; echo $? >att.status) &
pid=""
for _ in $(seq 1 250); do [ -s att/pid ] && pid=$(cat att/pid) && break; sleep 0.02; done
if [ -n "$pid" ]; then
    timeout 30 "$HL" attach --duration 1 "$pid" >/dev/null 2>att.err
    st=$?
    [ "$st" = 1 ] && [ "$(grep -c . att.err)" = 1 ] && grep -q "is a 32-bit program: attach works on 64-bit processes only" att.err &&
        pass "attach to a 32-bit process: refused in one line" || fail "attach -m32" "status $st: $(cat att.err)"
    touch att/stop
    for _ in $(seq 1 250); do [ -s att.status ] && break; sleep 0.02; done
    [ "$(cat att.status 2>/dev/null)" = 0 ] && [ "$(cat att.out)" = relinked ] &&
        pass "attach to a 32-bit process: it runs on and ends as alone" || fail "attach -m32: target" "$(cat att.status att.out 2>/dev/null)"
else
    fail "attach -m32" "relink32 did not start"
fi
finish
