#!/usr/bin/env bash
# The trace fuzzer (fuzz_trace.c, under ASan+UBSan) for SECONDS, from a seed corpus of real
# traces: a few test programs run under heaplens, each trace as its file and as its records,
# and the inputs of tests/fuzz/regress (each one a finding of an earlier run, fixed since).
# No crash, leak, undefined behaviour, JSON output that is not JSON, hang (10 s on one input) or
# RSS above 1 GiB: "1 passed"; else the finding's kind, its reproducer and the sanitizer's
# summary: "1 failed". The corpus grows in BUILD/fuzz from run to run.
#   tests/fuzz/run.sh BUILD_DIR SECONDS
set -u
BUILD="$1"; SECS="${2:-60}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
F="$BUILD/fuzz"
SEEDS="$F/seeds"; CORPUS="$F/corpus"; FOUND="$F/found"; SYSROOT="$F/sysroot"
# Programs whose traces cover the records: leaks of every kind, heap errors, C++, threads,
# fork, mmap, dlopen, a trace with no end (SIGKILL), an exec.
PROGRAMS="alloc_basic alloc_realloc alloc_aligned alloc_mmap reach_list reach_cycle err_double_free
          err_mismatch err_overflow err_free_interior cxx_new_delete threads_alloc fork_child
          dlopen_plugin exit_sigkill exec_parent signals_view"
# One input at most this long (the seeds are 1-3 KB; room for several chunks).
MAX_LEN=16384

if [[ ! -x "$F/fuzz_trace" || ! -x "$F/unpack" ]]; then
    echo "FAIL fuzz: $F/fuzz_trace not built (make fuzz builds it; clang and libclang-rt-14-dev)"
    echo "0 passed, 1 failed"; exit 1
fi
if [[ ! -e "$SEEDS/.made" ]]; then
    rm -rf "$SEEDS"; mkdir -p "$SEEDS"
    tmp=$(mktemp -d)
    for p in $PROGRAMS; do # (exit_sigkill's heaplens ends by its signal: no word from bash)
        ( "$BUILD/heaplens" run -q -o "$tmp/$p.%p.hl" -- "$BUILD/programs/$p" ) >/dev/null 2>&1 </dev/null
    done
    # and the allocator's statistics (ALLOC_STATS records, one a millisecond and one at the end)
    "$BUILD/heaplens" run -q --allocator-stats=1 -o "$tmp/threads_stats.%p.hl" -- \
        "$BUILD/programs/threads_alloc" >/dev/null 2>&1 </dev/null
    for t in "$tmp"/*.hl; do
        [[ -e "$t" ]] || continue
        b=$(basename "$t" .hl)
        cp "$t" "$SEEDS/$b.hl" && "$F/unpack" "$t" "$SEEDS/$b.rec"
    done
    rm -rf "$tmp"
    n=$(ls "$SEEDS" | wc -l)
    if [[ $n -lt 10 ]]; then
        echo "FAIL fuzz: only $n seed files from the test programs' traces"
        echo "0 passed, 1 failed"; exit 1
    fi
    touch "$SEEDS/.made"
fi
# The traces name the test programs by their absolute paths: a sysroot of those alone, so that
# frames of the programs are symbolized and libc's (separate debug info, slow) are not.
if [[ ! -d "$SYSROOT" ]]; then
    for p in "$BUILD"/programs/*; do
        real=$(readlink -f "$p")
        mkdir -p "$SYSROOT$(dirname "$real")" && ln -sf "$real" "$SYSROOT$real"
    done
fi
mkdir -p "$CORPUS" "$FOUND"
log="$F/last-run.log"
start=$(date +%s)
HEAPLENS_FUZZ_SYSROOT="$SYSROOT" "$F/fuzz_trace" -max_total_time="$SECS" -timeout=10 \
    -rss_limit_mb=1024 -max_len=$MAX_LEN -dict="$ROOT/tests/fuzz/trace.dict" -close_fd_mask=3 \
    -artifact_prefix="$FOUND/" -print_final_stats=1 "$CORPUS" "$SEEDS" "$ROOT/tests/fuzz/regress" \
    >"$log" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
execs=$(grep -o 'number_of_executed_units: [0-9]*' "$log" | awk '{print $2}')
if [[ $rc -eq 0 ]]; then
    echo "PASS fuzz: ${execs:-?} traces in ${took} s, no crash, leak, UB, bad JSON, hang or memory blow-up" \
         "(corpus $(ls "$CORPUS" | wc -l) inputs)"
    echo "1 passed, 0 failed"; exit 0
fi
repro=$(grep -o "Test unit written to .*" "$log" | tail -1 | sed 's/Test unit written to //')
echo "FAIL fuzz: after ${execs:-?} traces: $(grep -m1 -E 'ERROR: |runtime error|SUMMARY' "$log")"
grep -m3 -E '^    #[0-9] .* in [a-z_]+ /.*src/' "$log" | sed 's/^/    /'
echo "  reproduce: HEAPLENS_FUZZ_SYSROOT=$SYSROOT $F/fuzz_trace ${repro:-(no input written: see $log)}"
echo "  log: $log"
echo "0 passed, 1 failed"
exit 1
