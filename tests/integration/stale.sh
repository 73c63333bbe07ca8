#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stale.sh BUILD_DIR - stale copies of pointers never keep a leaked block alive. The agent's
# hooks, unwinder and exit path run on the program's stack; copies of the pointers they handled,
# left in dead frames, padding and registers, must not count as roots, or the last block of a
# loop, the last subtree cut from a tree, the last ring dropped would be "still reachable" where
# memcheck (whose allocator runs on its own stack) says lost. Each case is built at -O0 and -O2,
# run RUNS times under heaplens (a stale copy need not be in every run: ASLR moves things), and
# compared with memcheck's verdicts on the same binary when valgrind is installed, else with the
# figures each program's header states. Then a program that exhausts its own RLIMIT_AS: the exit
# scan has no memory left, and the program must still exit as natively.
# One line per check, "PASS name" or "FAIL name: reason"; the last line is "N passed, N failed".
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../programs" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-stale.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
RUNS=3      # heaplens runs per case and build mode
TIMEOUT=60  # seconds per command (valgrind included)

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }

[ -x "$HL" ] || { fail setup "$HL missing (make all)"; finish; }
HAVE_VG=0
command -v valgrind >/dev/null && HAVE_VG=1

# Built here, as a user would build them: no frame pointers forced, every optimisation level.
for prog in stale_loop stale_tree stale_ring stale_pvalloc; do
    for opt in O0 O2; do
        gcc -$opt -g -Wno-unused-result -I"$SRC" -o "$WORK/$prog.$opt" "$SRC/$prog.c" -pthread ||
            { fail setup "cannot build $prog at -$opt"; finish; }
    done
done

# heaplens_verdicts BINARY ARGS...: "definite_bytes/blocks indirect possible reachable" of one run.
heaplens_verdicts() {
    local d=$WORK/run
    rm -rf "$d"
    mkdir -p "$d"
    (cd "$d" && timeout -k 5 "$TIMEOUT" "$HL" run -q --json "$d/r.json" -o "$d/t.hl" -- "$@" \
        >/dev/null 2>"$d/stderr" </dev/null)
    python3 - "$d/r.json" <<'PYEOF' 2>/dev/null || echo "no-report"
import json, sys
l = json.load(open(sys.argv[1]))["leaks"]
kinds = ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable")
print(" ".join("%d/%d" % (l.get(k, {}).get("bytes", 0), l.get(k, {}).get("blocks", 0)) for k in kinds))
PYEOF
}

# memcheck_verdicts BINARY ARGS...: the same four from memcheck's LEAK SUMMARY.
memcheck_verdicts() {
    timeout -k 5 "$TIMEOUT" valgrind --leak-check=full --show-leak-kinds=all "$@" 2>&1 >/dev/null </dev/null |
        python3 -c '
import re, sys
text = sys.stdin.read()
out = []
for kind in ("definitely lost", "indirectly lost", "possibly lost", "still reachable"):
    m = re.search(kind + r": ([\d,]+) bytes in ([\d,]+) blocks", text)
    out.append("%s/%s" % (m.group(1).replace(",", ""), m.group(2).replace(",", "")) if m else "0/0")
print(" ".join(out) if "LEAK SUMMARY" in text or "All heap blocks were freed" in text else "no-summary")'
}

# case NAME EXPECTED BINARY ARGS...: EXPECTED as the program's header states it; memcheck's own
# verdicts replace it where valgrind runs the program.
case_() {
    local name=$1 want=$2
    shift 2
    local oracle="the program's header"
    if [ "$HAVE_VG" = 1 ] && [ "$name" = "${name#stale_pvalloc}" ]; then
        local vg
        vg=$(memcheck_verdicts "$@")
        if [ "$vg" != "$want" ]; then
            fail "$name: memcheck's verdicts" "memcheck says '$vg', the program's header '$want'"
        fi
        want=$vg
        oracle="memcheck"
    fi
    local i got bad=0
    for i in $(seq 1 $RUNS); do
        got=$(heaplens_verdicts "$@")
        if [ "$got" != "$want" ]; then
            fail "$name (run $i)" "heaplens '$got', $oracle '$want' (definite indirect possible reachable, bytes/blocks)"
            bad=1
        fi
    done
    [ "$bad" = 0 ] && pass "$name: $RUNS runs as $oracle: $want"
}

for opt in O0 O2; do
    for kind in malloc calloc posix_memalign strdup; do
        for depth in 0 5; do
            case_ "stale_loop $kind depth $depth -$opt" "1000/1000 0/0 0/0 0/0" "$WORK/stale_loop.$opt" "$kind" "$depth"
        done
    done
    case_ "stale_tree -$opt" "192/6 3648/114 0/0 224/7" "$WORK/stale_tree.$opt"
    case_ "stale_ring -$opt" "320/8 1280/32 0/0 0/0" "$WORK/stale_ring.$opt"
    case_ "stale_pvalloc -$opt" "4120/2 0/0 0/0 0/0" "$WORK/stale_pvalloc.$opt"
done

# RLIMIT_AS: the program takes all the address space it may have; it must exit as natively
# (status 5, same output), and the run says in one line that the scan had no memory.
if [ -x "$BUILD/programs/stale_rlimit_as" ]; then
    for mode in "" exhaust; do
        name="stale_rlimit_as${mode:+ $mode}"
        nat=$(timeout -k 5 "$TIMEOUT" "$BUILD/programs/stale_rlimit_as" $mode 2>/dev/null </dev/null)
        nst=$?
        hl=$(cd "$WORK" && timeout -k 5 "$TIMEOUT" "$HL" run -q -o "$WORK/rl.hl" -- "$BUILD/programs/stale_rlimit_as" $mode 2>"$WORK/rl.err" </dev/null)
        hst=$?
        if [ "$nst" = 5 ] && [ "$hst" = "$nst" ] && [ "$hl" = "$nat" ]; then
            pass "$name: exit status 5 and output as natively"
        else
            fail "$name" "natively $nst '$nat', under heaplens $hst '$hl': $(head -c 200 "$WORK/rl.err")"
        fi
        rm -f "$WORK"/rl.hl*
    done
else
    fail "stale_rlimit_as" "$BUILD/programs/stale_rlimit_as missing"
fi

finish
