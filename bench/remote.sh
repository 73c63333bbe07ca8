#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/remote.sh [BUILD_DIR] - the trace sent to a collector against the trace written to a file.
# Each workload runs natively, under `heaplens run -o FILE`, and under `heaplens run --remote ADDR`
# to a `heaplens server` on this machine, once on a UNIX socket and once on loopback TCP, in
# alternation (ROUNDS rounds, default 3, the order rotated each round). Prints the medians and
# the ratios remote/file and file/native of wall times, then of CPU times (the collector's CPU
# over the run added to the remote runs': less noisy on a shared machine), and the trace bytes
# the collector wrote next to the bytes the file run wrote (the same records; the sizes differ
# by a few TIME records).
# The collector runs on the same 2 cores as the program: its receiving and writing are part of
# the remote columns, as they would be on a target that is its own collector.
# Knobs: ROUNDS=N, DEPTH=N (heaplens -d, default 64 as in run.sh), REMOTE_WORKLOADS="a b".
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_setup remote "${1:-}" || exit 1
workloads=${REMOTE_WORKLOADS:-churn_mix churn_unique cxx procs} # also: tree
build_one "$B/measure" "$here/measure.c" gcc -O2 -Wall || exit 1
build_one "$B/churn_mix" "$here/churn_mix.c" gcc $NOFP || exit 1
build_one "$B/churn_unique" "$here/churn_unique.c" gcc $NOFP || exit 1
build_one "$B/tree" "$here/tree.c" gcc $NOFP || exit 1
build_one "$B/cxx" "$here/cxx.cc" g++ $NOFP || exit 1
build_one "$B/tiny_malloc" "$here/tiny_malloc.c" gcc $NOFP || exit 1

# Smaller than run.sh's sizes (about a second traced each): this section's figures are ratios.
wl_cmd() {
    case $1 in
    churn_mix) echo "$B/churn_mix 400000" ;;       # ~3 MB of trace: the bytes-heavy one
    churn_unique) echo "$B/churn_unique 100000" ;; # a new stack at nearly every allocation
    tree) echo "$B/tree 19" ;;                     # 1.5M allocations, a trace of a few KB
    cxx) echo "$B/cxx 16" ;;                       # operator new/delete churn
    procs) echo "/bin/sh $here/procs.sh $B/tiny_malloc 100" ;; # 101 processes, a trace each
    esac
}

run=$B/remote_runs
rm -rf "$run" && mkdir -p "$run/file" "$run/unix" "$run/tcp" || exit 1
servers=()
cleanup() {
    local p
    for p in "${servers[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A collector per transport; its address is its first line ("listening on ADDR").
start_server() { # NAME LISTEN -> sets addr_NAME
    local name=$1 i
    "$heaplens" server --listen "$2" -q -o "$run/$name" >"$run/$name.log" 2>&1 </dev/null &
    servers+=($!)
    eval "pid_$name=\$!"
    for ((i = 0; i < 100; i++)); do
        a=$(sed -n 's/^heaplens: listening on //p' "$run/$name.log")
        [ -n "$a" ] && { eval "addr_$name=\$a"; return 0; }
        sleep 0.05
    done
    log "remote: the $name collector did not start: $(head -1 "$run/$name.log")"
    return 1
}
start_server unix unix: || exit 1
start_server tcp tcp:127.0.0.1:0 || exit 1

# The collector renames a trace from .part to its name when the connection ends: wait until no
# part is left and the set of traces has not changed for a while (connections not yet accepted
# sit in the listen backlog, so the program's exit does not mean the collector has it all).
hz=$(getconf CLK_TCK)
server_cpu() { # PID -> user + system seconds of the collector so far
    awk -v hz="$hz" '{ sub(/^.*\) /, ""); printf "%.4f", ($12 + $13) / hz }' "/proc/$1/stat"
}
settle() { # DIR
    local n=-1 m same=0 i
    for ((i = 0; i < 600 && same < 6; i++)); do
        m=$(ls -A "$1" | wc -l)
        if ls -A "$1" | grep -q '\.part$' || [ "$m" != "$n" ]; then same=0; else same=$((same + 1)); fi
        n=$m
        sleep 0.05
    done
}

raw=$run/results.tsv
: >"$raw"
run_mode() { # WORKLOAD MODE ROUND
    local w=$1 mode=$2 r=$3 cmd res err dir fail="" wall cpu srv0 srv1 bytes=0 n=0
    cmd=$(wl_cmd "$w")
    res=$run/$w.$mode.r$r.res; err=$run/$w.$mode.r$r.err; dir=$run/$mode
    rm -f "$dir"/* "$dir"/.??* 2>/dev/null
    case $mode in
    native) "$B/measure" -r "$res" -o /dev/null -e "$err" -t 300 -- $cmd ;;
    file) "$B/measure" -r "$res" -o /dev/null -e "$err" -t 300 -- \
        "$heaplens" run -q -d "$depth" -o "$dir/%e.%p.hl" -- $cmd ;;
    unix | tcp)
        local addr_var=addr_$mode pid_var=pid_$mode
        srv0=$(server_cpu "${!pid_var}")
        "$B/measure" -r "$res" -o /dev/null -e "$err" -t 300 -- \
            "$heaplens" run -q -d "$depth" --remote "${!addr_var}" -o "$run/fallback.%p.hl" -- $cmd
        settle "$dir"
        srv1=$(server_cpu "${!pid_var}") ;;
    esac
    grep -q 'status=0 signal=0 timeout=0' "$res" 2>/dev/null || fail="$(cat "$res" 2>/dev/null) $(grep -m1 -v '^==' "$err" | cut -c1-100)"
    if ls "$run"/fallback.* >/dev/null 2>&1; then
        fail="the collector was not reached: $(grep -m1 heaplens "$err" | cut -c1-100)"
        rm -f "$run"/fallback.*
    fi
    wall=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$res" 2>/dev/null)
    # CPU time of the run's tree, plus the collector's over the run (clock ticks: 10 ms steps)
    cpu=$(sed -n 's/.*cpu=\([0-9.]*\).*/\1/p' "$res" 2>/dev/null)
    [ -n "${srv0:-}" ] && cpu=$(awk -v a="${cpu:-0}" -v s0="$srv0" -v s1="${srv1:-$srv0}" 'BEGIN {printf "%.4f", a + s1 - s0}')
    if [ $mode != native ]; then
        bytes=$(find "$dir" -maxdepth 1 -type f -name '*.hl*' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
        n=$(find "$dir" -maxdepth 1 -type f -name '*.hl*' | wc -l)
        [ -z "$fail" ] && [ "$n" = 0 ] && fail="no trace"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$mode" "$r" "${wall:-0}" "${cpu:-0}" "$bytes" "$n" "$fail" >>"$raw"
    rm -f "$dir"/* "$dir"/.??* 2>/dev/null
}

modes=(native file unix tcp)
log "remote: $(echo $workloads | wc -w) workloads x $rounds round(s); collectors at $addr_unix and $addr_tcp"
for w in $workloads; do
    for ((r = 1; r <= rounds; r++)); do
        for ((k = 0; k < 4; k++)); do
            m=${modes[$(((k + r - 1) % 4))]}
            log "remote: $w round $r/$rounds: $m"
            run_mode "$w" "$m" "$r"
        done
    done
done

python3 - "$raw" "$rounds" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
med, cpu, byt, cnt, fails, order = {}, {}, {}, {}, {}, []
for w, m, r, wall, c, b, n, fail in rows:
    if w not in order:
        order.append(w)
    if fail:
        fails.setdefault((w, m), fail)
        continue
    med.setdefault((w, m), []).append(float(wall))
    cpu.setdefault((w, m), []).append(float(c))
    byt.setdefault((w, m), []).append(int(b))
    cnt[(w, m)] = int(n)
def t(w, m, d=med):
    v = d.get((w, m))
    return statistics.median(v) if v and (w, m) not in fails else None
def ratio(a, b):
    return "%.2f" % (a / b) if a is not None and b else "n/a"
def ms(x):
    return "%.0f" % (x * 1e3) if x is not None else "failed"
def size(w, m):
    v = byt.get((w, m))
    return "%d" % statistics.median(v) if v and (w, m) not in fails else "-"
print()
print("== the trace to a collector (heaplens server) vs to a file, median of %s rounds ==" % sys.argv[2])
print("%-13s %8s %8s %8s %8s | %11s %9s %8s | %12s %12s %12s %7s" % (
    "workload", "native", "file", "unix", "tcp", "file/native", "unix/file", "tcp/file",
    "file bytes", "unix bytes", "tcp bytes", "traces"))
for w in order:
    tn, tf, tu, tt = (t(w, m) for m in ("native", "file", "unix", "tcp"))
    traces = "/".join(str(cnt.get((w, m), "-")) for m in ("file", "unix", "tcp"))
    print("%-13s %8s %8s %8s %8s | %11s %9s %8s | %12s %12s %12s %7s" % (
        w, ms(tn), ms(tf), ms(tu), ms(tt), ratio(tf, tn), ratio(tu, tf), ratio(tt, tf),
        size(w, "file"), size(w, "unix"), size(w, "tcp"), traces))
print("(wall times in ms; bytes: the sum of the run's traces, median; traces: files written, file/unix/tcp)")
print()
print("CPU time (user + system) of the run, the collector's included for unix and tcp, median:")
print("%-13s %8s %8s %8s %8s | %11s %9s %8s" % (
    "workload", "native", "file", "unix", "tcp", "file/native", "unix/file", "tcp/file"))
for w in order:
    tn, tf, tu, tt = (t(w, m, cpu) for m in ("native", "file", "unix", "tcp"))
    print("%-13s %8s %8s %8s %8s | %11s %9s %8s" % (
        w, ms(tn), ms(tf), ms(tu), ms(tt), ratio(tf, tn), ratio(tu, tf), ratio(tt, tf)))
for (w, m), f in sorted(fails.items()):
    print("%s %s: failed (%s)" % (w, m, f))
sys.exit(1 if fails else 0)
EOF
