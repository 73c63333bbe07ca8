#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cost.sh BUILD_A BUILD_B [WORKLOAD...] - what the agent of each build costs per heap event,
# counted rather than timed: each workload runs once per build under valgrind's cachegrind with
# the agent preloaded, and the agent's instructions and simulated cache misses (the functions of
# its own sources and of the zstd built into it, on every thread) are divided by the events of
# the trace. The counts are the same from one run to the next within a few tenths of a percent
# (ASLR moves hash slots), where wall time on these 2-core virtual machines drifts by 5-20%: a
# change worth 2% shows here in one run, and ab.sh then says whether the machine agrees.
# Workloads, smaller than run.sh's so that each takes 10-40 s under cachegrind:
#   cc1          gcc's cc1 -O2 on gen_c.py's 3,000-line file
#   sqlite       sqlite3 :memory: inserting gen_sql.py's 20,000 rows
#   cxx          cxx.cc, 8 rounds
#   tree         tree.c, 2^17 - 1 nodes
#   tree_paths   tree.c --recursive, 2^17 - 1 nodes
#   churn_unique churn_unique.c, 20,000 pairs
# Default: all of them. Caches simulated: 32 KiB L1 (8-way) and a 4 MiB last level (16-way),
# this machine's own sizes aside: the counts compare builds, they do not predict times.
# The exit scan is off (HEAPLENS_SCAN=0): under valgrind it would scan valgrind's own memory.
# memcpy and memset the agent calls are libc's and not counted; nor is the kernel's work.
set -u
usage() { echo "usage: bench/cost.sh BUILD_A BUILD_B [WORKLOAD...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
A=$(cd "$1" && pwd) && B=$(cd "$2" && pwd) || usage
shift 2
workloads=${*:-cc1 sqlite cxx tree tree_paths churn_unique}
command -v valgrind >/dev/null && command -v cg_annotate >/dev/null ||
    { echo "cost.sh: needs valgrind (cachegrind and cg_annotate)" >&2; exit 2; }
for b in "$A" "$B"; do
    [ -r "$b/libheaplens.so" ] && [ -x "$b/heaplens" ] || { echo "cost.sh: no agent in $b" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" # NOFP
W=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-cost.XXXXXX")
trap 'rm -rf "$W"' EXIT
gcc $NOFP -o "$W/tree" "$here/tree.c" && g++ $NOFP -o "$W/cxx" "$here/cxx.cc" &&
    gcc $NOFP -o "$W/churn_unique" "$here/churn_unique.c" || exit 1
python3 "$here/gen_c.py" 3000 >"$W/cc1_3k.c" && python3 "$here/gen_sql.py" 20000 >"$W/sql_20k.sql" || exit 1
cc1=$(gcc -print-prog-name=cc1)

wl_cmd() {
    case $1 in
    cc1) echo "$cc1 -quiet -O2 $W/cc1_3k.c -o /dev/null" ;;
    sqlite) command -v sqlite3 >/dev/null && echo "sqlite3 :memory: -init $W/sql_20k.sql -batch" ;;
    cxx) echo "$W/cxx 8" ;;
    tree) echo "$W/tree 17" ;;
    tree_paths) echo "$W/tree 17 --recursive" ;;
    churn_unique) echo "$W/churn_unique 20000" ;;
    *) echo "cost.sh: unknown workload $1" >&2 ;;
    esac
}

# BUILD WORKLOAD: "events agent_Ir agent_D1mr agent_DLmr total_Ir" of one run
measure() {
    local build=$1 wl=$2 out="$W/cg.$2" cmd
    cmd=$(wl_cmd "$wl") && [ -n "$cmd" ] || return 1
    rm -f "$out".* "$W"/t.*
    # valgrind's launcher is preloaded too, and so is its tool's start: they write traces of
    # their own under the same pid first (the program's takes a suffix), the program's largest.
    # shellcheck disable=SC2086 # the command is words
    LD_PRELOAD=$build/libheaplens.so HEAPLENS_SCAN=0 HEAPLENS_OUTPUT=$W/t.%p.hl \
        valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 \
        --LL=4194304,16,64 --cachegrind-out-file="$out.%p" $cmd </dev/null >/dev/null 2>&1
    local file trace events
    file=$(ls -S "$out".* 2>/dev/null | head -1)
    trace=$(ls -S "$W"/t.* 2>/dev/null | head -1)
    [ -n "$file" ] && [ -n "$trace" ] || return 1
    events=$("$build/heaplens" report -q --json - "$trace" 2>/dev/null |
        python3 -c 'import json,sys; t=json.load(sys.stdin)["totals"]; print(t["allocations"] + t["frees"])') ||
        return 1
    cg_annotate --show=Ir,D1mr,DLmr --threshold=0 "$file" 2>/dev/null | awk -v ev="$events" '
        { gsub(/\([^)]*\)/, ""); gsub(",", "") }
        /PROGRAM TOTALS/ { total = $1 }
        / \/.*src\/agent\/|\?\?\?:(ZSTD|HUF|HIST|FSE)_/ { ir += $1; d1 += $2; dl += $3 }
        END { print ev, ir + 0, d1 + 0, dl + 0, total + 0 }'
}

printf '%-13s %9s | %12s %12s %6s | %10s %10s %6s | %10s %10s %6s | %6s\n' workload events \
    "A Ir/event" "B Ir/event" "B/A" "A D1/event" "B D1/event" "B/A" "A LL/event" "B LL/event" "B/A" \
    "all Ir"
for wl in $workloads; do
    ra=$(measure "$A" "$wl") && rb=$(measure "$B" "$wl") || { printf '%-13s failed\n' "$wl"; continue; }
    echo "$ra $rb" | awk -v wl="$wl" '
        function ratio(b, a) { return a > 0 ? sprintf("%.3f", b / a) : "-" }
        { printf "%-13s %9d | %12.1f %12.1f %6s | %10.2f %10.2f %6s | %10.3f %10.3f %6s | %6s\n",
              wl, $1, $2 / $1, $7 / $6, ratio($7 / $6, $2 / $1), $3 / $1, $8 / $6,
              ratio($8 / $6, $3 / $1), $4 / $1, $9 / $6, ratio($9 / $6, $4 / $1), ratio($10, $5) }'
done
echo "Ir: instructions the agent ran (its own sources and zstd, every thread) per allocation or"
echo "release; D1, LL: its simulated L1 and last-level data read misses per event; all Ir: B/A of"
echo "the whole process's instructions (program, libc and agent)."
