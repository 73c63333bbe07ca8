#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/checking.sh [BUILD_DIR] - what each heap checking option costs over plain heaplens.
# Each workload runs natively, under plain `heaplens run`, and under `heaplens run` with one
# checking option each (--guard-pages=1/1000, --guard-pages=1, --paint, --hoard=64M,
# --redzone=16), in alternation (ROUNDS rounds, default 3, the order rotated each round), the
# tool alone (-q: no report, the trace is the result). Prints the medians and each run's ratio
# to plain heaplens, of wall times, then of CPU times (less noisy on a shared machine), with the
# spread of plain heaplens's own rounds (a ratio closer to 1 than that is noise).
# Knobs: ROUNDS=N, DEPTH=N (heaplens -d, default 64 as in run.sh), CHECK_WORKLOADS="a b".
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
bench_setup checking "${1:-}" || exit 1
workloads=${CHECK_WORKLOADS:-tree cxx churn_mix}
build_one "$B/measure" "$here/measure.c" gcc -O2 -Wall || exit 1
build_one "$B/churn_mix" "$here/churn_mix.c" gcc $NOFP || exit 1
build_one "$B/tree" "$here/tree.c" gcc $NOFP || exit 1
build_one "$B/cxx" "$here/cxx.cc" g++ $NOFP || exit 1

# Smaller than run.sh's sizes (one to a few seconds traced each): the figures are ratios.
wl_cmd() {
    case $1 in
    tree) echo "$B/tree 19" ;;               # 1.5M small allocations, as many frees
    cxx) echo "$B/cxx 16" ;;                 # operator new/delete churn
    churn_mix) echo "$B/churn_mix 400000" ;; # ~8000 deep stacks, varied lifetimes
    esac
}

# The runs, by name, and the options each adds to plain heaplens.
modes=(native plain gp1000 gp1 paint hoard redzone)
mode_args() {
    case $1 in
    gp1000) echo "--guard-pages=1/1000" ;;
    gp1) echo "--guard-pages=1" ;;
    paint) echo "--paint=alloc:0xAA,free:0xDD" ;;
    hoard) echo "--hoard=64M" ;;
    redzone) echo "--redzone=16" ;;
    esac
}

run=$B/checking_runs
rm -rf "$run" && mkdir -p "$run" || exit 1
trap 'rm -rf "$run"' EXIT
trap 'exit 130' INT TERM

raw=$run/results.tsv
: >"$raw"
run_mode() { # WORKLOAD MODE ROUND
    local w=$1 mode=$2 r=$3 cmd res err fail="" wall cpu
    cmd=$(wl_cmd "$w")
    res=$run/$w.$mode.r$r.res; err=$run/$w.$mode.r$r.err
    if [ "$mode" = native ]; then
        "$B/measure" -r "$res" -o /dev/null -e "$err" -t 300 -- $cmd
    else
        "$B/measure" -r "$res" -o /dev/null -e "$err" -t 300 -- \
            "$heaplens" run -q -d "$depth" $(mode_args "$mode") -o "$run/t.hl" -- $cmd
    fi
    grep -q 'status=0 signal=0 timeout=0' "$res" 2>/dev/null ||
        fail="$(cat "$res" 2>/dev/null) $(grep -m1 -v '^==' "$err" | cut -c1-100)"
    [ "$mode" = native ] || [ -n "$fail" ] || [ -s "$run/t.hl" ] || fail="no trace"
    wall=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$res" 2>/dev/null)
    cpu=$(sed -n 's/.*cpu=\([0-9.]*\).*/\1/p' "$res" 2>/dev/null)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$mode" "$r" "${wall:-0}" "${cpu:-0}" "$fail" >>"$raw"
    rm -f "$run"/t.hl*
}

n=${#modes[@]}
log "checking: $(echo $workloads | wc -w) workloads x $n runs x $rounds round(s)"
for w in $workloads; do
    for ((r = 1; r <= rounds; r++)); do
        for ((k = 0; k < n; k++)); do
            m=${modes[$(((k + r - 1) % n))]}
            log "checking: $w round $r/$rounds: $m"
            run_mode "$w" "$m" "$r"
        done
    done
done

python3 - "$raw" "$rounds" "${modes[*]}" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
modes = sys.argv[3].split()
names = {"native": "native", "plain": "heaplens", "gp1000": "gp=1/1000", "gp1": "gp=1",
         "paint": "paint", "hoard": "hoard=64M", "redzone": "redzone=16"}
wall, cpu, fails, order = {}, {}, {}, []
for w, m, r, t, c, fail in rows:
    if w not in order:
        order.append(w)
    if fail:
        fails.setdefault((w, m), fail)
        continue
    wall.setdefault((w, m), []).append(float(t))
    cpu.setdefault((w, m), []).append(float(c))
def med(d, w, m):
    v = d.get((w, m))
    return statistics.median(v) if v and (w, m) not in fails else None
def spread(d, w):
    # how far plain heaplens's own rounds lie apart: ratios closer to 1 than this are noise
    v = d.get((w, "plain"))
    return "%.0f%%" % (100 * (max(v) - min(v)) / statistics.median(v)) if v and len(v) > 1 else "-"
def table(d, what):
    print("%-10s " % "workload" + " ".join("%10s" % names[m] for m in modes) + " | " +
          " ".join("%10s" % names[m] for m in modes if m != "plain") + " | %6s" % "spread")
    for w in order:
        base = med(d, w, "plain")
        cells = ["%10s" % ("%.0f" % (med(d, w, m) * 1e3) if med(d, w, m) is not None else "failed")
                 for m in modes]
        ratios = ["%10s" % ("%.2f" % (med(d, w, m) / base) if base and med(d, w, m) is not None
                            else "n/a") for m in modes if m != "plain"]
        print("%-10s " % w + " ".join(cells) + " | " + " ".join(ratios) + " | %6s" % spread(d, w))
    print("(%s in ms, median of %s rounds; after the bar: each run / plain heaplens; spread:"
          " plain heaplens's slowest round less its fastest, over its median)" % (what, sys.argv[2]))
print()
print("== heap checking options against plain heaplens, side by side ==")
table(wall, "wall times")
print()
print("CPU time (user + system) of the run:")
table(cpu, "CPU times")
for (w, m), f in sorted(fails.items()):
    print("%s %s: failed (%s)" % (w, m, f))
sys.exit(1 if fails else 0)
PY
