#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# verdicts_real.sh BUILD_DIR - leak verdicts on real programs, checked against memcheck's. Each
# case runs several times under `heaplens run --json` and its bytes and blocks per kind are
# checked; where valgrind is installed, memcheck runs the same command and its LEAK SUMMARY is
# compared live. One line per check: "PASS name", "FAIL name: reason" or "SKIP name: why"; the
# last line is "N passed, N failed"; exit status 1 when anything failed.
#
# memcheck runs with its defaults: at the end of exit() heaplens has glibc and libstdc++ release
# what they keep to the end, as memcheck has them do, so "still reachable" counts the same blocks.
set -u

BUILD=$(cd "${1:-build}" && pwd) || { echo "verdicts_real.sh: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-verdicts.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RUNS=5      # every verdict is checked on this many runs: a stale pointer need not be in each
TIMEOUT=120 # seconds per command; memcheck takes a few, heaplens under one
PASSED=0
FAILED=0
# A fixed locale: the C library allocates per locale, and both tools must see the same program.
export LC_ALL=C

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }

# kinds_json REPORT.json: "definite B N indirect B N possible B N reachable B N"
kinds_json() {
    python3 - "$1" <<'EOF' 2>/dev/null || echo "no report"
import json, sys
leaks = json.load(open(sys.argv[1]))["leaks"]
out = []
for short, key in (("definite", "definitely_lost"), ("indirect", "indirectly_lost"),
                   ("possible", "possibly_lost"), ("reachable", "still_reachable")):
    out += [short, str(leaks[key]["bytes"]), str(leaks[key]["blocks"])]
print(" ".join(out))
EOF
}

# kinds_memcheck LOG: the same line from memcheck's LEAK SUMMARY ("All heap blocks were freed"
# means zero everywhere).
kinds_memcheck() {
    python3 - "$1" <<'EOF' 2>/dev/null || echo "no memcheck summary"
import re, sys
text = open(sys.argv[1], errors="replace").read()
out = []
for short, label in (("definite", "definitely lost"), ("indirect", "indirectly lost"),
                     ("possible", "possibly lost"), ("reachable", "still reachable")):
    m = re.search(label + r": ([\d,]+) bytes in ([\d,]+) blocks", text)
    if not m and "All heap blocks were freed" not in text:
        sys.exit(1)
    b, n = (m.group(1), m.group(2)) if m else ("0", "0")
    out += [short, b.replace(",", ""), n.replace(",", "")]
print(" ".join(out))
EOF
}

# lost KINDS: the three lost kinds of a kinds line (reachable left out)
lost() { echo "$1" | cut -d' ' -f1-9; }

# hl_runs NAME EXPECTED_LOST DIR PROG ARGS...: RUNS runs of heaplens in DIR; each must exit 0
# and give EXPECTED_LOST (definite, indirect, possible). Leaves the last report in $DIR/hl.json.
hl_runs() {
    local name=$1 want=$2 dir=$3 got st
    shift 3
    for r in $(seq 1 "$RUNS"); do
        (cd "$dir" && exec timeout -k 5 "$TIMEOUT" "$HL" run --json "$dir/hl.json" -o "$dir/hl.$r.hl" \
            -- "$@" >"$dir/hl.stdout" 2>"$dir/hl.stderr" </dev/null)
        st=$?
        got=$(kinds_json "$dir/hl.json")
        if [ "$st" != 0 ]; then
            fail "$name: run $r" "exit status $st ($(tail -1 "$dir/hl.stderr"))"
        elif [ "$(lost "$got")" = "$want" ]; then
            pass "$name: run $r: $want"
        else
            fail "$name: run $r" "expected $want, got $(lost "$got")"
        fi
    done
}

# memcheck NAME LOG DIR [VALGRIND OPTIONS...] -- PROG ARGS...: memcheck's kinds line, or "".
memcheck() {
    local name=$1 log=$2 dir=$3 opts=()
    shift 3
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    (cd "$dir" && exec timeout -k 5 "$TIMEOUT" valgrind --tool=memcheck --leak-check=full \
        "${opts[@]}" --log-file="$log" -- "$@" >/dev/null 2>&1 </dev/null)
    kinds_memcheck "$log"
}

# ---------------------------------------------------------------------------------------------
# tar czf: tar's old-style options ("czf" without a dash) are rebuilt as a new argv in
# decode_options: new_argv = xmalloc((argc + strlen("czf")) * 8) = 72 bytes for the 6 words of
# the command below, holding xstrdup("-c"), ("-z"), ("-f"): 3 blocks of 3 bytes. tar drops it
# when decode_options returns, so at exit it is definitely lost and its strings are indirectly
# lost. Its last copy on the stack is decode_options's spill slot, which exit() and the exit
# handlers leave unwritten; the agent's own ucontext_t at exit (getcontext writes no XMM slot)
# lay over that word, and the scan took it for a root: heaplens said "still reachable".
# ---------------------------------------------------------------------------------------------
TAR_WANT="definite 72 1 indirect 9 3 possible 0 0"
if ! command -v tar >/dev/null; then
    skip "tar" "tar is not installed"
elif ! tar --version 2>/dev/null | head -1 | grep -q 'GNU tar'; then
    skip "tar" "not GNU tar: the expected figures are those of GNU tar's option code"
elif ! command -v gzip >/dev/null; then
    skip "tar" "gzip is not installed (tar czf runs it)"
else
    D=$WORK/tar
    mkdir -p "$D/tree/src/lib" "$D/tree/doc" "$D/tree/empty"
    printf 'int main(void) { return 0; }\n' >"$D/tree/src/main.c"
    printf 'one\n' >"$D/tree/src/lib/one.txt"
    printf 'two\n' >"$D/tree/doc/README"
    ln -s ../src/main.c "$D/tree/doc/main.c"
    hl_runs "tar" "$TAR_WANT" "$D" tar czf out.tgz -C "$D" tree
    if [ "$(tar tzf "$D/out.tgz" 2>/dev/null | sort | tr '\n' ' ')" = \
        "tree/ tree/doc/ tree/doc/README tree/doc/main.c tree/empty/ tree/src/ tree/src/lib/ tree/src/lib/one.txt tree/src/main.c " ]; then
        pass "tar: the archive made under heaplens holds the tree"
    else
        fail "tar: archive" "$(tar tzf "$D/out.tgz" 2>&1 | tr '\n' ' ')"
    fi
    if ! command -v valgrind >/dev/null; then
        skip "tar: memcheck" "valgrind is not installed"
    else
        mc=$(memcheck tar "$D/memcheck.log" "$D" -- tar czf out.tgz -C "$D" tree)
        hl=$(kinds_json "$D/hl.json")
        if [ "$(lost "$mc")" = "$TAR_WANT" ]; then
            pass "tar: memcheck says $TAR_WANT too"
        else
            fail "tar: memcheck" "expected $TAR_WANT, memcheck gave $mc"
        fi
        if [ "$mc" = "$hl" ]; then
            pass "tar: every kind as memcheck ($mc)"
        else
            fail "tar: as memcheck" "memcheck $mc, heaplens $hl"
        fi
    fi
fi

# ---------------------------------------------------------------------------------------------
# gfortran: an 8,000,000-byte allocatable array left allocated, nothing pointing to it at exit:
# definitely lost. memcheck says "possibly lost" in its default layout, and it is wrong: its
# two "interior pointers" are words of libgfortran's .data, the _hash fields of class vtables of
# its IEEE modules (a vtable starts {int32 _hash, 4 zero bytes, int64 _size, ...}; gfortran's
# gfc_hash_value is below 10^8), read as 64-bit numbers such as 0x059aab5c and 0x059346dc. Under
# valgrind the client's heap lies at about 0x5000000, so the array covers them; natively the
# array is mapped near 0x7f0000000000. Moving valgrind's client above 10^8 with
# --aspace-minaddr leaves the same program, the same data and the same scan: memcheck then says
# definitely lost, as heaplens does.
# ---------------------------------------------------------------------------------------------
FORTRAN_WANT="definite 8000000 1 indirect 0 0 possible 0 0"
MOVED=0x20000000 # above every gfortran type hash (< 10^8 = 0x5f5e100)
fortran_case() { # NAME BINARY
    local name=$1 prog=$2 D=$WORK/$1
    mkdir -p "$D"
    hl_runs "$name" "$FORTRAN_WANT" "$D" "$prog"
    if grep -qx '1001000000.0' "$D/hl.stdout"; then
        pass "$name: output unchanged under heaplens"
    else
        fail "$name: output" "$(head -c 200 "$D/hl.stdout")"
    fi
    if ! command -v valgrind >/dev/null; then
        skip "$name: memcheck" "valgrind is not installed"
        return
    fi
    local hl moved usual
    hl=$(kinds_json "$D/hl.json")
    moved=$(memcheck "$name" "$D/memcheck-moved.log" "$D" --aspace-minaddr=$MOVED -- "$prog")
    if [ "$moved" = "$hl" ]; then
        pass "$name: every kind as memcheck with the client above 10^8 ($moved)"
    else
        fail "$name: as memcheck --aspace-minaddr=$MOVED" "memcheck $moved, heaplens $hl"
    fi
    # memcheck in its default layout: the same 8,000,000 bytes, lost one way or the other; a
    # "possibly lost" here is the layout's doing (see above).
    usual=$(memcheck "$name" "$D/memcheck.log" "$D" -- "$prog")
    case "$usual" in
    "definite 8000000 1 indirect 0 0 possible 0 0"*)
        pass "$name: memcheck's default layout says definitely lost too" ;;
    "definite 0 0 indirect 0 0 possible 8000000 1"*)
        pass "$name: memcheck's default layout says possibly lost (vtable hashes inside its low heap)" ;;
    *)
        fail "$name: memcheck, default layout" "expected the 8,000,000 bytes lost, got $usual" ;;
    esac
}

F90=$BUILD/programs/verdicts_fortran_array
if [ ! -x "$F90" ]; then
    skip "fortran" "$F90 was not built (gfortran missing?)"
else
    fortran_case fortran_O2 "$F90"
    HERE=$(cd "$(dirname "$0")" && pwd)
    if command -v gfortran >/dev/null &&
        gfortran -O0 -g -o "$WORK/fortran_O0.bin" "$HERE/../programs/verdicts_fortran_array.f90" 2>"$WORK/gfortran.log"; then
        fortran_case fortran_O0 "$WORK/fortran_O0.bin"
    else
        skip "fortran_O0" "cannot build at -O0: $(head -1 "$WORK/gfortran.log" 2>/dev/null)"
    fi
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
