#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# foreign.sh BUILD_DIR - allocators heaplens cannot see by preloading, and programs it cannot
# preload into:
#  - foreign_own_malloc / foreign_nopie define malloc, free, calloc and realloc in the executable
#    (PIE with a library bound at load under full RELRO; fixed-address with a library bound
#    lazily): the calls from shared libraries are routed to the agent and match memcheck's
#    figures (memcheck --soname-synonyms=somalloc=NONE, where valgrind is installed); the run
#    says, once at start and in the report, that calls inside the executable are not seen;
#  - a library dlopen()ed later is routed too, and a library's constructor (run before the
#    agent's) from the first call that reaches the agent;
#  - blocks crossing between the executable and a library are no heap error, and a block the
#    executable released and unmapped is not read by the exit scan (nor one made PROT_NONE);
#  - a statically linked program (static and static-pie) and a 32-bit one run untraced, output
#    and exit status unchanged, with one warning line.
# One line per check: "PASS name" or "FAIL name: reason" ("SKIP name: why" when a tool is
# missing); the last line is "N passed, N failed"; exit status 1 when anything failed.
set -u

BUILD=$(cd "${1:-build}" && pwd) || { echo "foreign.sh: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
PROGS=$BUILD/programs
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK=$HERE/check.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-foreign.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=30 # seconds per command (memcheck included); every case takes well under one natively
RUNS=3     # verdict cases run this many times: a verdict must not depend on where ASLR put things
ulimit -c 0 2>/dev/null

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }

# check CASE JSON EXPR... : assertions on a JSON report, one line each (see check.py).
check() {
    local out
    out=$(python3 "$CHECK" "$@" 2>&1)
    [ -n "$out" ] && echo "$out"
    PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
    FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
}

# hl CASE [run options...] -- PROG [ARGS...]: `heaplens run --json` in a fresh directory
# $D=$WORK/CASE; sets D, J (JSON), T (trace), ST (exit status); output in $D/stdout, $D/stderr.
hl() {
    local name=$1
    shift
    D=$WORK/$name
    J=$D/report.json
    T=$D/trace.hl
    mkdir -p "$D"
    local opts=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    { (cd "$D" && exec timeout -k 5 "$TIMEOUT" "$HL" run --json "$J" -o "$T" "${opts[@]}" -- "$@" \
        >"$D/stdout" 2>"$D/stderr" </dev/null); } 2>/dev/null
    ST=$?
}

# native PROG [ARGS...]: the program alone, started as a shell starts it (no /bin/sh retry of
# a file the kernel cannot execute, as execvp would); sets NST, output in $D/native.stdout
native() {
    { (cd "$D" && exec timeout -k 5 "$TIMEOUT" bash -c 'exec "$@"' bash "$@" \
        >"$D/native.stdout" 2>"$D/native.stderr" </dev/null); } 2>/dev/null
    NST=$?
}

expect() { # CASE WHAT EXPECTED ACTUAL
    if [ "$3" = "$4" ]; then pass "$1: $2"; else fail "$1: $2" "expected '$3', got '$4'"; fi
}

# heaplens's own lines on the program's stderr (its report lines excepted)
warnings() { grep '^heaplens: ' "$D/stderr"; }

# memcheck's figures for PROG ARGS, one line: allocs frees bytes, then bytes and blocks
# definitely, indirectly, possibly lost and still reachable. Empty when it could not run.
memcheck_figures() {
    timeout -k 5 $((TIMEOUT * 4)) valgrind --leak-check=full --soname-synonyms=somalloc=NONE "$@" 2>&1 >/dev/null |
        python3 -c '
import re, sys
t = re.sub(r"(?<=\d),(?=\d)", "", sys.stdin.read())
h = re.search(r"total heap usage: (\d+) allocs, (\d+) frees, (\d+) bytes", t)
k = [re.search(r"%s: (\d+) bytes in (\d+) blocks" % w, t) for w in
     ("definitely lost", "indirectly lost", "possibly lost", "still reachable")]
if h and all(k):
    print(*h.groups(), *[g for m in k for g in m.groups()])'
}

if [ ! -x "$HL" ] || [ ! -f "$BUILD/libheaplens.so" ]; then
    fail "setup" "$HL or $BUILD/libheaplens.so is missing (make all)"
    echo "$PASSED passed, $FAILED failed"
    exit 1
fi
for p in foreign_own_malloc foreign_nopie foreign_noaccess foreign_usable_size foreign_canonical_plt foreign_static foreign_static_pie libplugin.so alloc_basic; do
    [ -e "$PROGS/$p" ] || fail "setup" "$PROGS/$p is missing (make check builds it)"
done

HAVE_VALGRIND=0
command -v valgrind >/dev/null && HAVE_VALGRIND=1

# ================================================================================================
# An allocator defined by the executable
# ================================================================================================
# The library's work, all of it routed: the figures foreign_lib.c states, and memcheck's.
for prog in foreign_own_malloc foreign_nopie; do
    if [ "$HAVE_VALGRIND" = 1 ]; then
        MC=$(memcheck_figures "$PROGS/$prog")
        [ -n "$MC" ] || fail "$prog: memcheck" "no figures from valgrind"
    fi
    for run in $(seq "$RUNS"); do
        c=$prog.$run
        hl "$c" -- "$PROGS/$prog"
        expect "$c" "exit status" 0 "$ST"
        expect "$c" "stdout" "foreign_own_malloc done" "$(cat "$D/stdout")"
        expect "$c" "one warning line" "heaplens: $prog defines its own malloc, free, calloc, realloc: calls from shared libraries are traced, calls inside $prog itself are not" "$(warnings)"
        check "$c" "$J" "j['heap_traced'] == 'partial'" "j['trace_complete'] == False" \
            "totals['allocations'] == 17" "totals['frees'] == 12" "totals['bytes_allocated'] == 5279" \
            "lb('definite') == 148" "ln('definite') == 2" "lb('indirect') == 96" "ln('indirect') == 2" \
            "lb('possible') == 0" "lb('reachable') == 19" "ln('reachable') == 1" "len(errors) == 0" \
            "rec('definite', 'leak_calloc')['bytes'] == 100" "rec('definite', 'leak_list')['bytes'] == 48" \
            "rec('reachable', 'strdup')['bytes'] == 19"
        if [ "$HAVE_VALGRIND" = 1 ] && [ -n "$MC" ]; then
            read -r a f b db dn ib in pb pn rb rn <<<"$MC"
            check "$c: as memcheck" "$J" "totals['allocations'] == $a" "totals['frees'] == $f" \
                "totals['bytes_allocated'] == $b" "lb('definite') == $db" "ln('definite') == $dn" \
                "lb('indirect') == $ib" "ln('indirect') == $in" "lb('possible') == $pb" \
                "ln('possible') == $pn" "lb('reachable') == $rb" "ln('reachable') == $rn"
        fi
    done
    # The trace says it too, to whoever reads it later.
    out=$(timeout -k 5 "$TIMEOUT" "$HL" report "$T" 2>&1)
    if grep -q '^==heaplens== heap partly traced: ' <<<"$out"; then
        pass "$prog: heaplens report says the heap is partly traced"
    else
        fail "$prog: heaplens report" "no 'heap partly traced' line"
    fi
done
[ "$HAVE_VALGRIND" = 1 ] || skip "foreign: as memcheck" "valgrind is not installed"

# A library's constructor runs before heaplens's own: its allocations are routed from the first
# call that reaches the agent (the allocator mapping its arena, as jemalloc does in rustc). That
# first call is the one not seen: memcheck counts one allocation and one release more.
for prog in foreign_own_malloc foreign_nopie; do
    c=$prog.ctor
    export FOREIGN_LIB_CTOR=1
    hl "$c" -- "$PROGS/$prog"
    expect "$c" "exit status" 0 "$ST"
    check "$c" "$J" "rec('definite', 'leak_at_start')['bytes'] == 55" "lb('definite') == 203" \
        "ln('definite') == 3" "totals['allocations'] == 18" "totals['frees'] == 12" "len(errors) == 0"
    if [ "$HAVE_VALGRIND" = 1 ]; then
        MC=$(memcheck_figures "$PROGS/$prog")
        read -r a f b db dn ib in pb pn rb rn <<<"${MC:-x}"
        check "$c: as memcheck" "$J" "totals['allocations'] == ${a:-0} - 1" \
            "totals['frees'] == ${f:-0} - 1" "lb('definite') == ${db:-None}" \
            "ln('definite') == ${dn:-None}" "lb('indirect') == ${ib:-None}" \
            "lb('possible') == ${pb:-None}" "lb('reachable') == ${rb:-None}"
    fi
    unset FOREIGN_LIB_CTOR
done

# A library dlopen()ed after the start binds the executable's allocator too: routed after
# dlopen. memcheck also counts the loader's own allocations for dlopen (ld.so calls malloc
# through a pointer of its own, not a relocation slot): only the leaks are compared.
for prog in foreign_own_malloc foreign_nopie; do
    c=$prog.dlopen
    hl "$c" -- "$PROGS/$prog" dlopen
    expect "$c" "exit status" 0 "$ST"
    check "$c" "$J" "totals['allocations'] == 23" "totals['frees'] == 17" \
        "rec('definite', 'plugin_leak_buffer')['bytes'] == 777" "lb('definite') == 925" \
        "ln('definite') == 3" "lb('indirect') == 96" "lb('reachable') == 19" "len(errors) == 0"
    if [ "$HAVE_VALGRIND" = 1 ]; then
        MC=$(memcheck_figures "$PROGS/$prog" dlopen)
        read -r a f b db dn ib in pb pn rb rn <<<"${MC:-x}"
        check "$c: leaks as memcheck" "$J" "lb('definite') == ${db:-None}" "ln('definite') == ${dn:-None}" \
            "lb('indirect') == ${ib:-None}" "lb('possible') == ${pb:-None}" "lb('reachable') == ${rb:-None}"
    fi
done

# Blocks that cross: the library releases a block the executable made (the agent never saw it
# made: no heap error), the executable releases one the library made (unseen: it stays in use),
# and the executable's own pair is not counted.
for prog in foreign_own_malloc foreign_nopie; do
    c=$prog.inside
    hl "$c" -- "$PROGS/$prog" inside
    expect "$c" "exit status" 0 "$ST"
    expect "$c" "stdout" "foreign_own_malloc done" "$(cat "$D/stdout")"
    check "$c" "$J" "len(errors) == 0" "totals['allocations'] == 18" "totals['frees'] == 12" \
        "j['heap_traced'] == 'partial'"
done

# A block the library made and the executable released and its allocator unmapped: the exit
# scan must not read it (it faulted, killing the program), and gives it no verdict.
for prog in foreign_own_malloc foreign_nopie; do
    c=$prog.unmap
    hl "$c" -- "$PROGS/$prog" unmap
    expect "$c" "exit status" 0 "$ST"
    expect "$c" "stdout" "foreign_own_malloc done" "$(cat "$D/stdout")"
    check "$c" "$J" "j['scanned'] == True" "lb('unscanned') == 64 << 20" "ln('unscanned') == 1" \
        "lb('definite') == 148" "lb('reachable') == 19"
done

# The same in any program: a block it made inaccessible itself (PROT_NONE) is left unread.
hl noaccess -- "$PROGS/foreign_noaccess"
expect noaccess "exit status" 0 "$ST"
expect noaccess "stdout" "foreign_noaccess done" "$(cat "$D/stdout")"
check noaccess "$J" "j['scanned'] == True" "lb('unscanned') == 16384" "ln('unscanned') == 1" \
    "len(errors) == 0"

# An executable that defines only malloc_usable_size loses no event: no warning, whole heap.
hl usable_size -- "$PROGS/foreign_usable_size"
expect usable_size "exit status" 0 "$ST"
expect usable_size "no warning" "" "$(warnings)"
check usable_size "$J" "j['heap_traced'] == 'all'" "j['trace_complete'] == True" \
    "lb('definite') == 10" "ln('definite') == 1"

# A non-PIE executable importing malloc and free through canonical PLT entries defines no
# allocator (it crashed with SIGSEGV when they were taken for its own: Debian's python3).
hl canonical_plt -- "$PROGS/foreign_canonical_plt"
expect canonical_plt "exit status" 0 "$ST"
expect canonical_plt "stdout" "foreign_canonical_plt done" "$(cat "$D/stdout")"
expect canonical_plt "no warning" "" "$(warnings)"
check canonical_plt "$J" "j['heap_traced'] == 'all'" "j['trace_complete'] == True" \
    "calls['malloc'] >= 8" "lb('definite') == 40" "ln('definite') == 1"
if [ -x /usr/bin/python3 ] && [ "$(readelf -h /usr/bin/python3 2>/dev/null | awk '/Type:/ {print $2}')" = EXEC ]; then
    hl python3_nopie -- /usr/bin/python3 -c 'print("python3 ran")'
    expect python3_nopie "exit status" 0 "$ST"
    expect python3_nopie "stdout" "python3 ran" "$(cat "$D/stdout")"
    expect python3_nopie "no warning" "" "$(warnings)"
    check python3_nopie "$J" "j['heap_traced'] == 'all'" "calls['malloc'] > 100"
fi

# A program on glibc's allocator: no warning, the whole heap, a complete trace.
hl alloc_basic -- "$PROGS/alloc_basic"
expect alloc_basic "exit status" 0 "$ST"
expect alloc_basic "no warning" "" "$(warnings)"
check alloc_basic "$J" "j['heap_traced'] == 'all'" "j['trace_complete'] == True"

# ================================================================================================
# Programs the agent cannot be loaded into: they run, untraced
# ================================================================================================
for prog in foreign_static foreign_static_pie; do
    hl "$prog" -- "$PROGS/$prog"
    native "$PROGS/$prog"
    expect "$prog" "exit status as without heaplens" "3 3" "$NST $ST"
    expect "$prog" "stdout as without heaplens" "foreign_static runs" "$(cat "$D/stdout")"
    cmp -s "$D/stdout" "$D/native.stdout" || fail "$prog: stdout" "differs from the program's alone"
    expect "$prog" "one warning line" "heaplens: $PROGS/$prog is statically linked (heaplens is loaded into dynamically linked programs only): running it untraced" "$(cat "$D/stderr")"
    [ ! -e "$T" ] && [ ! -e "$J" ] && pass "$prog: no trace, no report" || fail "$prog: files" "a trace or report was written"
    # It ends as it would alone, by its signal too.
    hl "$prog.kill" -- "$PROGS/$prog" kill
    native "$PROGS/$prog" kill
    expect "$prog.kill" "exit status as without heaplens" "143 143" "$NST $ST"
done

# A 32-bit program (a minimal static i386 ELF: write, then exit 3) runs as it would alone: on a
# kernel without 32-bit support both fail to start alike.
D=$WORK/elf32
mkdir -p "$D"
python3 - "$D/elf32" <<'EOF'
import struct, sys
msg, base, ehsize, phsize = b"elf32 runs\n", 0x08048000, 52, 32
def code(msg_addr):
    return (b"\xb8\x04\0\0\0" b"\xbb\x01\0\0\0" + b"\xb9" + struct.pack("<I", msg_addr) +
            b"\xba" + struct.pack("<I", len(msg)) + b"\xcd\x80" +  # write(1, msg, len)
            b"\xb8\x01\0\0\0" b"\xbb\x03\0\0\0" b"\xcd\x80")         # exit(3)
start = base + ehsize + phsize
body = code(start + len(code(0))) + msg
size = ehsize + phsize + len(body)
eh = b"\x7fELF\x01\x01\x01" + b"\0" * 9 + struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, start, ehsize, 0, 0, ehsize, phsize, 1, 40, 0, 0)
ph = struct.pack("<IIIIIIII", 1, 0, base, base, size, size, 5, 0x1000)
open(sys.argv[1], "wb").write(eh + ph + body)
EOF
chmod +x "$D/elf32"
hl elf32 -- "$D/elf32"
native "$D/elf32"
expect elf32 "exit status as without heaplens" "$NST" "$ST"
cmp -s "$D/stdout" "$D/native.stdout" && pass "elf32: stdout as without heaplens" || fail "elf32: stdout" "differs from the program's alone"
# A static 32-bit program: with a 32-bit agent built, untraced as any static program; without
# one, because it is 32-bit.
if [ -e "$BUILD/agents/i686/libheaplens.so" ]; then
    want="heaplens: $D/elf32 is statically linked (heaplens is loaded into dynamically linked programs only): running it untraced"
else
    want="heaplens: $D/elf32 is a 32-bit program (this heaplens has no 32-bit agent: build it with gcc-multilib and libzstd-dev:i386 installed): running it untraced"
fi
expect elf32 "warning line" "$want" "$(head -n1 "$D/stderr")"
# An agent alone in its directory (no agents/i686 beside it): 32-bit programs are not for it.
mkdir -p "$D/lone" && cp "$BUILD/libheaplens.so" "$D/lone/"
got=$(HEAPLENS_AGENT="$D/lone/libheaplens.so" "$BUILD/heaplens" run -q -- "$D/elf32" 2>&1 >/dev/null | head -n1)
expect elf32 "warning line, with no 32-bit agent" \
    "heaplens: $D/elf32 is a 32-bit program (this heaplens has no 32-bit agent: build it with gcc-multilib and libzstd-dev:i386 installed): running it untraced" "$got"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
