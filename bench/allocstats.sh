#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/allocstats.sh [BUILD_DIR] [ROUNDS] - what --allocator-stats costs: tree and cxx traced by
# plain `heaplens run` and by `heaplens run --allocator-stats` (the default period, 100 ms), in
# alternation so that both see the same machine; the CPU time (user + system, of the program and
# the agent's writer) of each run, the medians and their ratio, as bench/ab.sh prints them.
set -u
B=$(cd "${1:-build}" && pwd) || { echo "usage: bench/allocstats.sh [BUILD_DIR] [ROUNDS]" >&2; exit 2; }
ROUNDS=${2:-9}
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
printf '%-8s %12s %16s %7s\n' workload "plain cpu ms" "--allocator-stats" "ratio"
for w in tree cxx; do
    a=() b=()
    for _ in $(seq "$ROUNDS"); do
        a+=("$(cpu_ms "$B/heaplens" run -q -o "$W/t.%p.hl" -- "$W/$w")")
        b+=("$(cpu_ms "$B/heaplens" run -q --allocator-stats -o "$W/t.%p.hl" -- "$W/$w")")
    done
    ma=$(median "${a[@]}") mb=$(median "${b[@]}")
    printf '%-8s %12s %16s %7s   plain: %s  stats: %s\n' "$w" "$ma" "$mb" \
        "$(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.3f", b / a }')" "${a[*]}" "${b[*]}"
done
