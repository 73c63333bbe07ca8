#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# asan.sh BUILD_DIR ASAN_BUILD_DIR [UNIT_TEST...] - the analyzer and the CLI built under
# AddressSanitizer and UndefinedBehaviorSanitizer (make asan-build): the analyzer's unit tests,
# then the CLI's every output on real traces (made by BUILD_DIR's heaplens run) and on the same
# traces cut short and with bytes flipped. Any sanitizer report (memory error, leak, undefined
# behaviour) fails its check; a damaged trace must get a report of what was readable (exit 0)
# or one line saying why not (exit 1), never a signal. One line per check, "PASS name" or
# "FAIL name: reason"; the last line is "N passed, N failed".
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
ASAN=$(cd "${2:-$BUILD/asan}" 2>/dev/null && pwd) || { echo "FAIL setup: no ASan build ${2:-} (make asan-build)"; echo "0 passed, 1 failed"; exit 1; }
shift 2 2>/dev/null
TESTS="${*:-test_reader test_aggregate test_heap_traced test_varint test_symbols}"
HL=$ASAN/heaplens
PROGS=$BUILD/programs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-asan.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=120
# A sanitizer's finding ends the process with this status (heaplens itself uses 0, 1, 2, the
# program's status and --error-exitcode): told apart from heaplens's own answers.
SAN_EXIT=86
export ASAN_OPTIONS="exitcode=$SAN_EXIT:detect_leaks=1:abort_on_error=0:print_summary=1"
export UBSAN_OPTIONS="exitcode=$SAN_EXIT:halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="exitcode=$SAN_EXIT"
export HEAPLENS_AGENT=$BUILD/libheaplens.so # heaplens memcheck runs programs with the plain agent
SAN_RE='ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior|Leak)Sanitizer'

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }

# The sanitizer's first lines of a log, on one line.
san_says() { grep -m1 -E "$SAN_RE" "$1" | cut -c1-200; grep -m2 -E '^ +#[0-9]+ .* in [a-z_]+ .*src/' "$1" | sed 's/^ *//' | tr '\n' ' '; }

[ -x "$HL" ] || { fail setup "$HL missing (make asan-build)"; finish; }
[ -x "$BUILD/heaplens" ] || { fail setup "$BUILD/heaplens missing (make all)"; finish; }

# --- the analyzer's unit tests ------------------------------------------------------------------
for t in $TESTS; do
    if [ ! -x "$ASAN/tests/$t" ]; then
        fail "unit-$t" "$ASAN/tests/$t missing (make asan-build)"
        continue
    fi
    (cd "$WORK" && timeout $TIMEOUT "$ASAN/tests/$t") >"$WORK/$t.log" 2>&1
    st=$?
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$WORK/$t.log" | tail -1)
    if grep -qE "$SAN_RE" "$WORK/$t.log"; then
        fail "unit-$t" "sanitizer: $(san_says "$WORK/$t.log")"
    elif [ $st -ne 0 ] || [ -z "$line" ]; then
        fail "unit-$t" "exit $st, ${line:-no result line}: $(grep -m3 -E '^FAIL|expected|required' "$WORK/$t.log" | tr '\n' ' ')"
    else
        pass "unit-$t ($line)"
    fi
done

# --- real traces --------------------------------------------------------------------------------
# trace NAME PROG: $WORK/NAME.hl from a run of the program under the plain build.
trace() {
    local name=$1 prog=$PROGS/$2
    [ -x "$prog" ] || { fail "run-$name" "$prog missing (make $BUILD/programs/$2)"; return 1; }
    { (cd "$WORK" && timeout $TIMEOUT "$BUILD/heaplens" run -q -o "$WORK/$name.hl" -- "$prog") \
        >"$WORK/$name.run.log" 2>&1 </dev/null; } 2>/dev/null # (bash's word on exit_sigkill)
    [ -s "$WORK/$name.hl" ] || { fail "run-$name" "no trace: $(tail -2 "$WORK/$name.run.log" | tr '\n' ' ')"; return 1; }
}

# sane NAME LOG STATUS OK_STATUSES: no sanitizer report, no signal, an expected status.
sane() {
    local name=$1 log=$2 st=$3 ok=$4
    if grep -qE "$SAN_RE" "$log"; then
        fail "$name" "sanitizer: $(san_says "$log")"
    elif [ "$st" -ge 124 ]; then
        fail "$name" "status $st (signal or timeout): $(tail -2 "$log" | tr '\n' ' ')"
    elif ! [[ " $ok " == *" $st "* ]]; then
        fail "$name" "status $st, expected one of $ok: $(tail -2 "$log" | tr '\n' ' ')"
    else
        return 0
    fi
    return 1
}

# Every output of `report` into $WORK/out.NAME.*; stderr in $WORK/NAME.log. Prints the status.
report_all() {
    local name=$1 t=$2 o=$WORK/out.$1
    timeout $TIMEOUT "$HL" report --json "$o.json" --html "$o.html" --sarif "$o.sarif" \
        --collapsed "$o.folded" --flamegraph "$o.svg" --pprof "$o.pb.gz" --massif "$o.massif" \
        --show-leak-kinds=all "$t" >"$WORK/$name.out" 2>"$WORK/$name.log"
    echo $?
}

# The outputs parse: JSON, SARIF, SVG (XML), pprof (gzip), massif, the page's embedded data.
check_outputs() {
    python3 - "$WORK/out.$1" <<'EOF'
import gzip, json, sys, xml.dom.minidom
o = sys.argv[1]
d = json.load(open(o + ".json"))
assert "totals" in d, "JSON without totals"
s = json.load(open(o + ".sarif"))
assert s.get("version") == "2.1.0", "SARIF version"
xml.dom.minidom.parse(o + ".svg")
gzip.open(o + ".pb.gz").read()
assert open(o + ".massif").read().startswith("desc:"), "massif header"
page = open(o + ".html").read()
assert "<html" in page and "{{HEAPLENS_DATA}}" not in page, "HTML page without its data"
for line in open(o + ".folded"):
    assert line.rstrip("\n").rsplit(" ", 1)[1].isdigit(), "collapsed line: " + line
EOF
}

NAMES=""
for spec in basic:alloc_basic list:reach_list dfree:err_double_free cxx:cxx_new_delete \
            threads:threads_alloc mmap:alloc_mmap killed:exit_sigkill; do
    name=${spec%%:*}
    trace "$name" "${spec#*:}" && NAMES="$NAMES $name"
done

for name in $NAMES; do
    t=$WORK/$name.hl
    st=$(report_all "$name" "$t")
    if sane "report-$name" "$WORK/$name.log" "$st" "0"; then
        if out=$(check_outputs "$name" 2>&1); then
            pass "report-$name (text, JSON, HTML, SARIF, collapsed, SVG, pprof, massif)"
        else
            fail "report-$name" "an output does not parse: $(echo "$out" | tail -1)"
        fi
    fi
    timeout $TIMEOUT "$HL" report --summary --top 5 --sort peak --histogram --timeline --threads \
        --json "$WORK/views.$name.json" "$t" >"$WORK/views.$name.out" 2>"$WORK/views.$name.log"
    st=$?
    if sane "views-$name" "$WORK/views.$name.log" "$st" "0"; then
        if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "summary" in d and "timeline" in d' \
               "$WORK/views.$name.json" 2>/dev/null && grep -q "ALLOCATION SIZES" "$WORK/views.$name.out"; then
            pass "views-$name (text and JSON)"
        else
            fail "views-$name" "views missing from the text or the JSON"
        fi
    fi
    timeout $TIMEOUT "$HL" html "$WORK/out.$name.json" -o "$WORK/page.$name.html" >"$WORK/html.$name.log" 2>&1
    st=$?
    sane "html-$name" "$WORK/html.$name.log" "$st" "0" && pass "html-$name (page from the JSON report)"
done

if [[ " $NAMES " == *" basic "* && " $NAMES " == *" list "* ]]; then
    timeout $TIMEOUT "$HL" diff --json "$WORK/diff.json" --html "$WORK/diff.html" \
        "$WORK/basic.hl" "$WORK/list.hl" >"$WORK/diff.out" 2>"$WORK/diff.log"
    st=$?
    if sane diff "$WORK/diff.log" "$st" "0"; then
        if python3 -c 'import json,sys; assert "diff" in json.load(open(sys.argv[1]))' "$WORK/diff.json" 2>/dev/null &&
           grep -q "heaplens diff:" "$WORK/diff.out"; then
            pass "diff (text, JSON, HTML)"
        else
            fail diff "no diff in the text or the JSON"
        fi
    fi
fi

# memcheck's text and XML come from a run: the ASan CLI runs the program with the plain agent.
for prog in reach_list err_double_free; do
    timeout $TIMEOUT "$HL" memcheck --leak-check=full --show-leak-kinds=all --xml=yes \
        --xml-file="$WORK/vg.$prog.xml" --log-file="$WORK/vg.$prog.txt" "$PROGS/$prog" \
        >"$WORK/vg.$prog.out" 2>"$WORK/vg.$prog.log" </dev/null
    st=$?
    if sane "memcheck-$prog" "$WORK/vg.$prog.log" "$st" "0 1"; then
        if python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' \
               "$WORK/vg.$prog.xml" 2>/dev/null && grep -q "HEAP SUMMARY" "$WORK/vg.$prog.txt"; then
            pass "memcheck-$prog (Valgrind text and XML)"
        else
            fail "memcheck-$prog" "XML not well-formed or text without HEAP SUMMARY"
        fi
    fi
done

# --- damaged traces -----------------------------------------------------------------------------
# Cut at points through the file, and with a byte flipped in the header, a chunk header and the
# compressed data: report (every output) and diff against the sound trace.
# One line "heaplens: ..." when refused (status 1); the text report's own lines aside.
one_line() { [ "$1" -ne 1 ] || { [ "$(grep -vc '^==heaplens==' "$2")" -eq 1 ] && grep -q '^heaplens: ' "$2"; }; }

# damaged NAME FILE SOUND: report (every output) and diff SOUND.hl FILE, sanitizer-clean, 0 (what
# was readable) or 1 in one line.
damaged() {
    local name=$1 t=$2 sound=$WORK/$3.hl st dst
    st=$(report_all "$name" "$t")
    sane "damaged-$name" "$WORK/$name.log" "$st" "0 1" || return
    one_line "$st" "$WORK/$name.log" ||
        { fail "damaged-$name" "refused in more than one line: $(head -3 "$WORK/$name.log" | tr '\n' ' ')"; return; }
    timeout $TIMEOUT "$HL" diff --json "$WORK/d.json" "$sound" "$t" >"$WORK/d.out" 2>"$WORK/d.log"
    dst=$?
    sane "damaged-$name-diff" "$WORK/d.log" "$dst" "0 1" || return
    one_line "$dst" "$WORK/d.log" ||
        { fail "damaged-$name-diff" "refused in more than one line: $(head -3 "$WORK/d.log" | tr '\n' ' ')"; return; }
    pass "damaged-$name (report exit $st, diff exit $dst)"
}

for src in list threads; do
    [[ " $NAMES " == *" $src "* ]] || continue
    t=$WORK/$src.hl
    size=$(stat -c %s "$t")
    for cut in 0 8 16 20 32 $((size / 4)) $((size / 2)) $((size * 3 / 4)) $((size - 1)); do
        head -c "$cut" "$t" >"$WORK/cut.$src.$cut.hl"
        damaged "cut-$src-at-$cut-of-$size" "$WORK/cut.$src.$cut.hl" "$src"
    done
    for at in 0 9 17 21 29 40 $((size / 2)) $((size - 2)); do
        cp "$t" "$WORK/flip.$src.$at.hl"
        printf "$(printf '\\%03o' $(( ($(od -An -tu1 -j "$at" -N1 "$t") ^ 0x5a) )))" |
            dd of="$WORK/flip.$src.$at.hl" bs=1 seek="$at" conv=notrunc status=none
        damaged "flip-$src-byte-$at" "$WORK/flip.$src.$at.hl" "$src"
    done
done

finish
