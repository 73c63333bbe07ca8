#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/allocstats.sh [BUILD_DIR] [ROUNDS] - what --allocator-stats costs: tree (2^19 nodes) and
# cxx traced by plain `heaplens run`, by `--allocator-stats` (every 100 ms) and by
# `--allocator-stats=3600000` (a sample at the start and one at the end: what glibc's arena
# locks cost, apart from the sampling), in alternation so that all see the same machine; the
# CPU time (user + system, of the program and the agent's writer) of each run, the medians and
# their ratios to plain, as bench/ab.sh prints them.
set -u
B=$(cd "${1:-build}" && pwd) || { echo "usage: bench/allocstats.sh [BUILD_DIR] [ROUNDS]" >&2; exit 2; }
ROUNDS=${2:-11}
here=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-allocstats.XXXXXX")
trap 'rm -rf "$W"' EXIT
NOFP="-O2 -g -fomit-frame-pointer"
gcc $NOFP -o "$W/tree" "$here/tree.c" && g++ $NOFP -o "$W/cxx" "$here/cxx.cc" || exit 1
cpu_ms() { # COMMAND...: the CPU milliseconds of one run
    /usr/bin/time -f "%U %S" -o "$W/time" "$@" >/dev/null 2>&1
    rm -f "$W"/t.*.hl
    awk '{printf "%d\n", ($1 + $2) * 1000}' "$W/time"
}
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b / a }'; }
printf '%-8s %9s %9s %7s %9s %7s\n' workload "plain ms" "stats ms" ratio "once ms" ratio
for w in "tree 19" cxx; do
    a=() b=() c=()
    for _ in $(seq "$ROUNDS"); do
        a+=("$(cpu_ms "$B/heaplens" run -q -o "$W/t.%p.hl" -- $W/$w)")
        b+=("$(cpu_ms "$B/heaplens" run -q --allocator-stats -o "$W/t.%p.hl" -- $W/$w)")
        c+=("$(cpu_ms "$B/heaplens" run -q --allocator-stats=3600000 -o "$W/t.%p.hl" -- $W/$w)")
    done
    ma=$(median "${a[@]}") mb=$(median "${b[@]}") mc=$(median "${c[@]}")
    printf '%-8s %9s %9s %7s %9s %7s   plain: %s  stats: %s  once: %s\n' "${w%% *}" "$ma" "$mb" \
        "$(ratio "$ma" "$mb")" "$mc" "$(ratio "$ma" "$mc")" "${a[*]}" "${b[*]}" "${c[*]}"
done
