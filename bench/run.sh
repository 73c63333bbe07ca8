#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/run.sh BUILD_DIR [--quick] - heaplens against native and heaptrack on twelve workloads.
# Builds the workloads into BUILD_DIR/bench/, runs native / heaptrack / heaplens in alternation
# (3 rounds, 1 with --quick), then analyses one round's traces with `heaplens report` and
# `heaptrack_print`, and times heaplens's text, JSON and HTML reports of the same trace in
# alternation and the HTML page's drawing in headless Chromium. Prints one table per workload
# and writes bench/results/latest.md.
# A tool that fails on a workload gets "failed (reason)" in its cells; the script goes on.
# Environment knobs (all optional):
#   ROUNDS=N           rounds per workload (default 3, 1 with --quick)
#   DEPTH=N            heaplens -d (default 64: heaptrack's fixed unwind limit is 64 frames)
#   VMEM_MB=N          virtual-memory cap for every traced run and analysis (default 4096)
#   TIMEOUT=S          per-command time limit in seconds (default 300, 120 with --quick)
#   SLOWEST=K          a traced run may take at most K times native (default 40; >= 30 s)
#   WORKLOADS="a b"    subset, by name (churn_deep churn_deep2 churn_unique tree tree_paths cxx
#                      python sqlite churn_mix cc1 procs procs_bash spawn make)
#   KEEP=1             keep the traces in BUILD_DIR/bench/runs/
#   REPORT_ROUNDS=N    rounds of text/JSON/HTML reports of one trace (default ROUNDS)
#   HEAPLENS_ARGS=...  extra `heaplens run` options;  HT_PRINT_ARGS=... extra heaptrack_print ones
#   EXTRAS="remote live_scan checking"  the sections after the table (bench/remote.sh,
#                      bench/live_scan.py, bench/checking.sh; ROUNDS rounds each); EXTRAS=""
#                      leaves them out
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
quick=0
for a in "$@"; do
    case $a in
    --quick) quick=1 ;;
    *) echo "usage: bench/run.sh BUILD_DIR [--quick]" >&2; exit 2 ;;
    esac
done
case $build in /*) ;; *) build=$root/$build ;; esac
B=$build/bench
mkdir -p "$B" "$root/bench/results" || exit 1

if [ $quick = 1 ]; then rounds=${ROUNDS:-1}; timeout=${TIMEOUT:-120}; else rounds=${ROUNDS:-3}; timeout=${TIMEOUT:-300}; fi
depth=${DEPTH:-64}
vmem=${VMEM_MB:-4096}
workloads=${WORKLOADS:-churn_deep churn_deep2 churn_unique tree tree_paths cxx python sqlite churn_mix cc1 procs procs_bash spawn make}
nprocs=500 # programs procs.sh starts: its row also reads in ms per process
nspawn=200 # programs spawn.c starts (by fork then exec) from its heap of spawn_blocks blocks
spawn_blocks=100000

# --- build the workloads: -O2 -g, no frame pointers (the tracers must unwind with CFI) -------
CC=${CC:-gcc}
CXX=${CXX:-g++}
BENCH_NAME=bench
. "$here/lib.sh"
build_one "$B/measure" "$here/measure.c" $CC -O2 -Wall || exit 1
# A workload that does not build is reported as failed in its row; the others still run.
build_one "$B/churn_deep" "$here/churn_deep.c" $CC $NOFP -pthread
build_one "$B/churn_mix" "$here/churn_mix.c" $CC $NOFP
build_one "$B/tree" "$here/tree.c" $CC $NOFP
build_one "$B/cxx" "$here/cxx.cc" $CXX $NOFP
build_one "$B/churn_unique" "$here/churn_unique.c" $CC $NOFP
build_one "$B/tiny_malloc" "$here/tiny_malloc.c" $CC $NOFP
build_one "$B/spawn" "$here/spawn.c" $CC $NOFP
# The compiler workload: gcc's own cc1 -O2 on a generated ~30k-line file (same bytes every run).
cc1=$($CC -print-prog-name=cc1 2>/dev/null)
csrc=$B/cc1_30k.c
if [ ! -s "$csrc" ] || [ "$here/gen_c.py" -nt "$csrc" ]; then
    python3 "$here/gen_c.py" 30000 >"$csrc.tmp" && mv "$csrc.tmp" "$csrc" || { log "bench: cannot generate $csrc"; rm -f "$csrc" "$csrc.tmp"; }
fi
# The build workload: `make -j2` of this project in a fresh copy (made before each run, untimed).
snap=$B/make_src
rm -rf "$snap" && mkdir -p "$snap" &&
    if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$root" archive HEAD | tar -x -C "$snap"
    else
        tar -C "$root" --exclude=./build --exclude=./.git -cf - . | tar -x -C "$snap"
    fi || { log "bench: cannot copy the project for the make workload"; rm -rf "$snap"; }
sql=$B/sqlite_200k.sql
if [ ! -s "$sql" ] || [ "$here/gen_sql.py" -nt "$sql" ]; then
    python3 "$here/gen_sql.py" 200000 >"$sql.tmp" && mv "$sql.tmp" "$sql" || { log "bench: cannot generate $sql"; rm -f "$sql" "$sql.tmp"; }
fi
# A real python3 binary (a pyenv shim is a shell script: we would trace bash).
py=/usr/bin/python3
[ -x "$py" ] || py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
sqlite=$(command -v sqlite3 || true)
bash=$(command -v bash || true)

heaplens=$build/heaplens
have_ht=1; command -v heaptrack >/dev/null && command -v heaptrack_print >/dev/null || have_ht=0

# Each workload: a description, a stdin file and a command line.
wl_desc() {
    case $1 in
    churn_deep) echo "1M malloc/free pairs from 50 call sites, each 15-25 frames deep (unique paths), 1 thread" ;;
    churn_deep2) echo "churn_deep in 2 threads, 1M pairs PER THREAD (2M total; compare cost per allocation)" ;;
    tree) echo "build + tear down a 2M-node binary tree of small strings, iteratively (~6.3M allocations, 3 call paths)" ;;
    tree_paths) echo "tree --recursive: the same tree built and torn down by recursion, every node on its own call path (2M distinct stacks)" ;;
    churn_unique) echo "200k malloc/free pairs, each at the end of a random walk through 5 mutually recursive functions, 15-25 frames deep (every stack different)" ;;
    cc1) echo "gcc's cc1 -O2 on a generated $(wc -l <"$csrc" 2>/dev/null || echo '?')-line C file (bench/gen_c.py)" ;;
    procs) echo "a shell script starting $nprocs short programs (/bin/true and bench/tiny_malloc.c), one after the other" ;;
    procs_bash) echo "the same script run by bash, whose children allocate before their exec (each writes a trace of its own)" ;;
    spawn) echo "a program holding $spawn_blocks live blocks starting $nspawn short programs (bench/tiny_malloc.c) by fork then exec, one after the other" ;;
    make) echo "make -j2 of this project in a fresh copy (heaplens follows every child; heaptrack traces make itself)" ;;
    cxx) echo "C++ std::map/std::string/std::vector churn (~3.7M allocations)" ;;
    python) echo "CPython $($py -c 'import platform; print(platform.python_version())' 2>/dev/null) running bench/alloc_heavy.py (dict/list/string churn)" ;;
    sqlite) echo "sqlite3 :memory: inserting 200k rows, SQL script on stdin (~7.6M allocations)" ;;
    churn_mix) echo "realistic mix: 16 functions per level, ~8000 distinct 15-25-frame stacks, 1.2M allocations, varied lifetimes" ;;
    esac
}
wl_stdin() { case $1 in sqlite) echo "$sql" ;; *) echo /dev/null ;; esac; }
wl_cmd() {
    case $1 in
    churn_deep) echo "$B/churn_deep 1" ;;
    churn_deep2) echo "$B/churn_deep 2" ;;
    tree) echo "$B/tree" ;;
    tree_paths) echo "$B/tree --recursive" ;;
    cxx) echo "$B/cxx" ;;
    python) echo "$py $here/alloc_heavy.py" ;;
    sqlite) echo "$sqlite :memory:" ;;
    churn_mix) echo "$B/churn_mix" ;;
    churn_unique) echo "$B/churn_unique" ;;
    cc1) [ -n "$cc1" ] && [ -s "$csrc" ] && echo "$cc1 -quiet -O2 $csrc -o /dev/null" ;;
    procs) echo "/bin/sh $here/procs.sh $B/tiny_malloc $nprocs" ;;
    procs_bash) [ -n "$bash" ] && echo "$bash $here/procs.sh $B/tiny_malloc $nprocs" ;;
    spawn) echo "$B/spawn $nspawn $spawn_blocks $B/tiny_malloc" ;;
    make) [ -d "$snap" ] && echo "make -s -j2 -C $B/make_run" ;;
    esac
}
# Untimed set-up before each run of a workload.
wl_prepare() {
    case $1 in
    make) rm -rf "$B/make_run" && cp -a "$snap" "$B/make_run" ;;
    esac
}

raw=$B/results.tsv
: >"$raw"
# record WORKLOAD TOOL ROUND PHASE KEY=VALUE... (one line per measured command)
record() { local IFS=$'\t'; printf '%s\n' "$*" >>"$raw"; }

# Reason for a failed command: timeout, signal, exit status, plus the most telling stderr line.
why() { # RESULTFILE STDERRFILE
    local res=$1 err=$2 st sig to hint
    st=$(sed -n 's/.*status=\([-0-9]*\).*/\1/p' "$res"); sig=$(sed -n 's/.*signal=\([0-9]*\).*/\1/p' "$res")
    to=$(sed -n 's/.*timeout=\([01]\).*/\1/p' "$res")
    if grep -q "bad_alloc" "$err" 2>/dev/null; then
        hint="std::bad_alloc at the ${vmem} MiB cap"
    elif grep -q -i "MemoryError\|out of memory\|Cannot allocate memory" "$err" 2>/dev/null; then
        hint="out of memory at the ${vmem} MiB cap"
    else
        # The tool's own report lines are noise here, except heaplens' "killed by signal" line.
        hint=$(grep -v -E "^==heaplens== +(ERROR SUMMARY|[a-z ]+:)" "$err" 2>/dev/null |
            grep -m1 -E "terminate called|Segmentation|Abort|rror|annot|failed|Killed|killed by" | tr '\t' ' ' | cut -c1-110)
    fi
    if [ "$to" = 1 ]; then echo "timeout after ${limit:-$timeout}s"
    elif [ "${sig:-0}" != 0 ]; then echo "killed by signal $sig${hint:+: $hint}"
    elif [ "$st" = 141 ]; then echo "SIGPIPE: its helper died${hint:+: $hint}"
    else echo "exit $st${hint:+: $hint}"; fi
}
ok_result() { grep -q 'status=0 signal=0 timeout=0' "$1"; }
run_failed() { awk -F'\t' -v w="$1" -v t="$2" -v r="$3" '$1==w && $2==t && $3==r && $4=="run" && /\tfail=/ {f=1} END {exit !f}' "$raw"; }

# A traced run may take at most SLOWEST times the native run of round 1 (at least MIN_LIMIT s,
# at most TIMEOUT): a tool that is pathologically slow on one workload reads "timeout" there
# instead of holding the whole bench for minutes; and one that timed out is not run again.
SLOWEST=${SLOWEST:-40}
MIN_LIMIT=30
tool_limit() { # WORKLOAD TOOL -> seconds
    local nat lim
    nat=$(awk -F'\t' -v w="$1" '$1==w && $2=="native" && $3=="1" && $4=="run" && !/\tfail=/ {
        for (i = 5; i <= NF; i++) if ($i ~ /^wall=/) { sub(/^wall=/, "", $i); print $i } }' "$raw" | head -1)
    lim=$timeout
    if [ "$2" != native ] && [ -n "$nat" ]; then
        lim=$(awk -v n="$nat" -v k="$SLOWEST" -v lo=$MIN_LIMIT -v hi="$timeout" 'BEGIN {
            x = n * k; if (x < lo) x = lo; if (x > hi) x = hi; printf "%d", x + 0.5 }')
    fi
    echo "$lim"
}
timed_out_before() { awk -F'\t' -v w="$1" -v t="$2" '$1==w && $2==t && $4=="run" && /fail=timeout/ {f=1} END {exit !f}' "$raw"; }

run_tool() { # WORKLOAD TOOL ROUND
    local w=$1 tool=$2 r=$3 dir=$B/runs/$1 in cmd res err out limit
    in=$(wl_stdin "$w"); cmd=$(wl_cmd "$w")
    local prog=${cmd%% *}
    if [ -z "$cmd" ] || [ ! -x "$(command -v "$prog" 2>/dev/null)" ] || [ ! -r "$in" ]; then
        record "$w" "$tool" "$r" run "fail=workload not available (${prog:-unknown name}${in:+, stdin $in})"
        return
    fi
    if timed_out_before "$w" "$tool"; then
        record "$w" "$tool" "$r" run "fail=timeout in an earlier round: not run again"
        return
    fi
    limit=$(tool_limit "$w" "$tool")
    res=$dir/$tool.r$r.res; err=$dir/$tool.r$r.err; out=$dir/$tool.r$r.out
    rm -f "$res"
    wl_prepare "$w" || { record "$w" "$tool" "$r" run "fail=cannot prepare the workload"; return; }
    case $tool in
    native)
        "$B/measure" -r "$res" -i "$in" -o "$out" -e "$err" -t "$limit" -- $cmd ;;
    heaptrack)
        [ $have_ht = 1 ] || { record "$w" "$tool" "$r" run "fail=heaptrack not installed"; return; }
        rm -f "$dir/ht.r$r".*
        # Helper runs in the measured tree: heaptrack (a shell script) + heaptrack_interpret.
        "$B/measure" -r "$res" -i "$in" -o "$out" -e "$err" -t "$limit" -v "$vmem" -- \
            heaptrack -o "$dir/ht.r$r" $cmd ;;
    heaplens)
        [ -x "$heaplens" ] || { record "$w" "$tool" "$r" run "fail=$heaplens not built"; return; }
        rm -f "$dir/hl.r$r".*
        "$B/measure" -r "$res" -i "$in" -o "$out" -e "$err" -t "$limit" -v "$vmem" -- \
            "$heaplens" run -q -d "$depth" ${HEAPLENS_ARGS:-} -o "$dir/hl.r$r.hl" -- $cmd ;;
    esac
    if [ ! -s "$res" ]; then record "$w" "$tool" "$r" run "fail=measure produced no result"; return; fi
    local fields trace="" size="" fail=""
    fields=$(tr ' ' '\t' <"$res")
    ok_result "$res" || fail=$(why "$res" "$err")
    if [ $tool = heaptrack ]; then
        grep -q -E "terminate called|bad_alloc" "$err" && [ -z "$fail" ] && fail="heaptrack_interpret died: $(grep -m1 -E 'terminate|bad_alloc' "$err" | cut -c1-90)"
        trace=$(ls "$dir/ht.r$r".* 2>/dev/null | head -1)
        [ -z "$fail" ] && [ -z "$trace" ] && fail="no trace written"
    elif [ $tool = heaplens ]; then
        trace=$dir/hl.r$r.hl
        [ -z "$fail" ] && [ ! -s "$trace" ] && fail="no trace written: $(grep -m1 -E '^(ERROR|heaplens:)' "$err" | tr '\t' ' ' | cut -c1-110)"
    fi
    [ -n "$trace" ] && [ -f "$trace" ] && size=$(stat -c %s "$trace")
    # Allocation counts as each tool reports them.
    local calls=""
    [ $tool = heaplens ] && calls=$(sed -n 's/.*total heap usage: \([0-9,]*\) allocs.*/\1/p' "$err" | head -1 | tr -d ,)
    record "$w" "$tool" "$r" run $fields ${size:+trace_bytes=$size} ${calls:+allocs=$calls} ${fail:+"fail=$fail"}
}

analyze() { # WORKLOAD ROUND: heaptrack_print and heaplens report on this round's traces
    local w=$1 r=$2 dir=$B/runs/$1 trace res err fail calls
    if [ $have_ht = 1 ]; then
        trace=$(ls "$dir/ht.r$r".* 2>/dev/null | head -1)
        if run_failed "$w" heaptrack "$r"; then
            record "$w" heaptrack "$r" analyze "fail=n/a: the traced run failed"
        elif [ -n "$trace" ]; then
            res=$dir/ht_print.res; err=$dir/ht_print.err
            "$B/measure" -r "$res" -o "$dir/ht_print.out" -e "$err" -t "$timeout" -v "$vmem" -- \
                heaptrack_print ${HT_PRINT_ARGS:-} "$trace"
            fail=""; ok_result "$res" || fail=$(why "$res" "$err")
            calls=$(sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p' "$dir/ht_print.out" | head -1)
            record "$w" heaptrack "$r" analyze $(tr ' ' '\t' <"$res") ${calls:+allocs=$calls} ${fail:+"fail=$fail"}
        fi
    fi
    trace=$dir/hl.r$r.hl
    if run_failed "$w" heaplens "$r"; then
        record "$w" heaplens "$r" analyze "fail=n/a: the traced run failed"
    elif [ -s "$trace" ]; then
        res=$dir/hl_report.res; err=$dir/hl_report.err
        "$B/measure" -r "$res" -o "$dir/hl_report.out" -e "$err" -t "$timeout" -v "$vmem" -- \
            "$heaplens" report "$trace"
        fail=""; ok_result "$res" || fail=$(why "$res" "$err")
        record "$w" heaplens "$r" analyze $(tr ' ' '\t' <"$res") ${fail:+"fail=$fail"}
        report_formats "$w" "$trace"
    fi
}

# The text report, the machine report and the page of one trace, in alternation (the order
# reversed every other round) for REPORT_ROUNDS rounds (default ROUNDS): the JSON/text and
# HTML/text ratios come from one run. Then the page is opened in headless Chromium (when there
# is one) and the time until it has drawn is recorded.
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
report_formats() { # WORKLOAD TRACE
    local w=$1 trace=$2 dir=$B/runs/$1 res=$B/runs/$1/hl_fmt.res err=$B/runs/$1/hl_fmt.err
    local k fmt file fail order
    for ((k = 1; k <= ${REPORT_ROUNDS:-$rounds}; k++)); do
        order="text json html"; [ $((k % 2)) = 0 ] && order="html json text"
        for fmt in $order; do
            file=$dir/hl_report.$fmt; rm -f "$file"
            if [ $fmt = text ]; then # the plain report on stderr, as `heaplens report` prints it
                "$B/measure" -r "$res" -o /dev/null -e "$file" -t "$timeout" -v "$vmem" -- \
                    "$heaplens" report "$trace"
            else # -q: without the text report
                "$B/measure" -r "$res" -o /dev/null -e "$err" -t "$timeout" -v "$vmem" -- \
                    "$heaplens" report -q --$fmt "$file" "$trace"
            fi
            fail=""; ok_result "$res" || fail=$(why "$res" "$err")
            record "$w" heaplens "$k" "report_$fmt" $(tr ' ' '\t' <"$res") \
                "bytes=$(stat -c %s "$file" 2>/dev/null || echo 0)" ${fail:+"fail=$fail"}
        done
    done
    local page=$dir/hl_report.html load
    if [ -n "$chromium" ] && [ -s "$page" ]; then
        load=$(timeout 120 python3 "$root/tests/integration/html_check.py" "$page" --load-time \
            --chromium "$chromium" 2>/dev/null | sed -n 's/^load_s=//p')
        record "$w" heaplens 1 page_open ${load:+"wall=$load"} ${load:-"fail=chromium did not draw the page"}
    fi
    [ "${KEEP:-0}" = 1 ] || rm -f "$dir"/hl_report.json "$dir"/hl_report.html "$dir"/hl_report.text
}

cd "$B" || exit 1 # stray files (traces of children, core dumps) land here, not in the tree
# The reports keep their symbol lookups in a cache of the bench's own, empty at the start: the
# first report through a module looks it up, later ones (other rounds, other workloads through
# libc) read the answers back, as a user's reports do (src/analyze/symcache.h).
export HEAPLENS_SYMBOL_CACHE=$B/symcache
rm -rf "$HEAPLENS_SYMBOL_CACHE"
start=$(date +%s)
load0=$(cut -d' ' -f1 /proc/loadavg)
log "bench: $(echo $workloads | wc -w) workloads x $rounds round(s); heaplens -d $depth; limits ${vmem} MiB virtual, ${timeout}s per command"
[ -x "$heaplens" ] || log "bench: $heaplens missing - heaplens cells will read failed"
for w in $workloads; do
    dir=$B/runs/$w
    rm -rf "$dir"; mkdir -p "$dir"
    record "$w" - - desc "desc=$(wl_desc "$w")" $([ $w = procs ] || [ $w = procs_bash ] && echo "procs=$nprocs") \
        $([ $w = spawn ] && echo "procs=$nspawn")
    tools=(native heaptrack heaplens)
    for ((r = 1; r <= rounds; r++)); do
        # heaplens from new files each round (lib.sh: fresh_copy), reports and all.
        fresh_copy "$build" "$B/heaplens_copy" && heaplens=$B/heaplens_copy/heaplens ||
            heaplens=$build/heaplens
        # Alternate, and rotate the order each round so no tool always runs first.
        for ((k = 0; k < 3; k++)); do
            t=${tools[$(((k + r - 1) % 3))]}
            log "bench: $w round $r/$rounds: $t"
            run_tool "$w" "$t" "$r"
        done
        if [ $r = 1 ]; then analyze "$w" 1; fi
        [ "${KEEP:-0}" = 1 ] || rm -f "$dir"/ht.r"$r".* "$dir"/hl.r"$r".*
    done
done
elapsed=$(($(date +%s) - start))
load1=$(cut -d' ' -f1 /proc/loadavg)
python3 "$here/summarize.py" "$raw" "$root/bench/results/latest.md" \
    "rounds=$rounds depth=$depth vmem_mb=$vmem timeout=$timeout elapsed=$elapsed quick=$quick load0=$load0 load1=$load1"
status=$?

# --- extra sections, each a script of its own, ratios from one run (EXTRAS="" skips them) ------
# remote: the trace sent to a collector vs written to a file (bench/remote.sh);
# live_scan: the live leak scan of a process holding 1M blocks vs the exit scan and LSan's check;
# checking: each heap checking option against plain heaplens (bench/checking.sh).
extras=${EXTRAS-remote live_scan checking}
md=$root/bench/results/latest.md
for x in $extras; do
    out=$B/$x.txt
    case $x in
    remote) ROUNDS=$rounds DEPTH=$depth "$here/remote.sh" "$build" >"$out" ;;
    checking) ROUNDS=$rounds DEPTH=$depth "$here/checking.sh" "$build" >"$out" ;;
    live_scan)
        build_one "$B/live_big" "$here/live_big.c" $CC -O2 -g
        lsan=$B/live_big_lsan
        command -v clang >/dev/null && build_one "$lsan" "$here/live_big.c" clang -O2 -g -fsanitize=leak 2>/dev/null || lsan=""
        python3 "$here/live_scan.py" --heaplens "$heaplens" --prog "$B/live_big" ${lsan:+--lsan "$lsan"} \
            --rounds "$rounds" --dir "$B" >"$out" ;;
    *) log "bench: no extra section $x (remote, live_scan, checking)"; continue ;;
    esac
    [ $? = 0 ] || status=1
    cat "$out"
    { printf '\n```\n'; cat "$out"; printf '```\n'; } >>"$md"
done
log "bench: $(($(date +%s) - start)) s in all"
exit $status
