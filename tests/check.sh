#!/usr/bin/env bash
# Every test heaplens has: unit tests, integration tests of real programs under the agent, and
# the shared acceptance cases (memcheck's verdicts as oracle) when ../shared sits beside the
# clone. Prints each suite's own lines, then one total: "N passed, N failed".
#   tests/check.sh BUILD_DIR UNIT_TEST...
set -u
BUILD="$1"; shift
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pass=0; fail=0
# The reports keep their symbol lookups in a cache of the run's own, not the user's: every
# suite meets it cold, then warm (src/analyze/symcache.h).
SYMCACHE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-check-symbols.XXXXXX")
export HEAPLENS_SYMBOL_CACHE="$SYMCACHE_HOME/symbols"
trap 'rm -rf "$SYMCACHE_HOME"' EXIT

tally() { # the last "N passed, N failed" line of a suite's output, or one failure
    local out="$1" name="$2" line
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)
    if [[ -z "$line" ]]; then
        echo "FAIL $name: no result line"; fail=$((fail + 1)); return
    fi
    pass=$((pass + $(echo "$line" | awk '{print $1}')))
    fail=$((fail + $(echo "$line" | awk '{print $3}')))
}

for t in "$@"; do
    echo "== unit: $t"
    out=$("$BUILD/tests/$t" 2>&1); echo "$out" | grep -v '^PASS'
    tally "$out" "$t"
done

echo "== integration"
out=$("$ROOT/tests/integration/run.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" integration

echo "== html (report pages and diff in headless Chromium)"
out=$("$ROOT/tests/integration/html.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" html

echo "== cli (--help of every command against its parser, --version, the program's environment)"
out=$("$ROOT/tests/integration/cli.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" cli

echo "== reports"
out=$("$ROOT/tests/integration/reports.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" reports

echo "== verdicts on real programs (tar, gfortran) against memcheck"
out=$("$ROOT/tests/integration/verdicts_real.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" verdicts_real
echo "== stale pointers (each leak case at -O0 and -O2, several runs, against memcheck)"
out=$("$ROOT/tests/integration/stale.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" stale
echo "== remote (heaplens server: the collector, its sockets, tokens and refusals)"
out=$("$ROOT/tests/integration/remote.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" remote
echo "== security (trace and output files: full disks, devices, planted links, modes)"
out=$("$ROOT/tests/integration/security.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" security
echo "== remote sink (the agent's trace sent to a collector; a collector missing or gone mid-run)"
out=$("$ROOT/tests/integration/remote_sink.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" remote_sink
echo "== attach (heaplens attach / detach: running processes traced from now on, then left as they were)"
out=$("$ROOT/tests/integration/attach.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" attach
echo "== live (heaplens shell: a running process's control socket, live scans, marks)"
out=$("$ROOT/tests/integration/live.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" live
echo "== m32 (32-bit programs: their agent, a 64-bit collector and shell)"
out=$("$ROOT/tests/integration/m32.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" m32
echo "== foreign (allocators defined by the program, programs heaplens cannot load into)"
out=$("$ROOT/tests/integration/foreign.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" foreign
echo "== dropin (heaplens memcheck against valgrind: XML, text, suppressions, ctest)"
out=$("$ROOT/tests/integration/dropin.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" dropin
echo "== harm (the program runs as natively: pthread_exit, ulimit -f, its descriptor 2, clone)"
out=$("$ROOT/tests/integration/harm.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" harm
echo "== checking (--redzone, --paint, --hoard, --guard-pages: underruns, overruns, use after free, against memcheck)"
out=$("$ROOT/tests/integration/checking.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" checking

echo "== api (the in-program API from C, C++ and Fortran, with and without heaplens; installed)"
out=$("$ROOT/tests/integration/api.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" api

echo "== allocstats (--allocator-stats: glibc's figures and RSS beside the live heap; other allocators)"
out=$("$ROOT/tests/integration/allocstats.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" allocstats

echo "== asan (the analyzer's tests and every report format under ASan+UBSan, damaged traces)"
out=$("$ROOT/tests/integration/asan.sh" "$BUILD" "$BUILD/asan" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" asan
echo "== hostile (traces past every bound, written record by record; the CLI's bad input)"
out=$("$ROOT/tests/integration/hostile.sh" "$BUILD" 2>&1); echo "$out" | grep -v '^PASS'
tally "$out" hostile
# CI (CI=true) fuzzes longer: it starts from no corpus, a developer's build keeps its own.
secs=20; [[ -n "${CI:-}" ]] && secs=120
echo "== fuzz (any bytes as a trace through every report under ASan+UBSan, $secs s)"
out=$("$ROOT/tests/fuzz/run.sh" "$BUILD" "$secs" 2>&1); echo "$out"
tally "$out" fuzz

ACC="$ROOT/../shared/acceptance/run.sh"
if [[ -x "$ACC" ]]; then
    echo "== acceptance ($ACC)"
    out=$(HEAPLENS="$(cd "$BUILD" && pwd)/heaplens" "$ACC" 2>&1); echo "$out" | grep -v '^PASS'
    tally "$out" acceptance
else
    echo "== acceptance: ../shared/acceptance not present, skipped"
fi
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
