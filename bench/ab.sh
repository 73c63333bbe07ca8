#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/ab.sh BUILD_A BUILD_B [ROUNDS] - two builds of heaplens on the same workloads, run in
# alternation (A, B, A, B...) so that both see the same machine: the CPU time (user + system, of
# the program and the agent's writer) of each run, medians, and B/A. For a change on the hot
# path: BUILD_A from the base commit (git archive BASE | tar -x -C DIR && make -C DIR), BUILD_B
# this tree's. WORKLOADS="churn_unique tree_paths ..." picks others: churn_deep, tree, cxx,
# churn_mix (the default), churn_unique, tree_paths (tree --recursive, 19 levels here), procs
# (procs.sh: 200 short programs, each traced; the CPU of all of them).
set -u
A=$(cd "$1" && pwd) && B=$(cd "$2" && pwd) || { echo "usage: bench/ab.sh BUILD_A BUILD_B [ROUNDS]" >&2; exit 2; }
ROUNDS=${3:-9}
here=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-ab.XXXXXX")
trap 'rm -rf "$W"' EXIT
NOFP="-O2 -g -fomit-frame-pointer"
gcc $NOFP -pthread -o "$W/churn_deep" "$here/churn_deep.c" &&
    gcc $NOFP -o "$W/tree" "$here/tree.c" && gcc $NOFP -o "$W/churn_mix" "$here/churn_mix.c" &&
    g++ $NOFP -o "$W/cxx" "$here/cxx.cc" && gcc $NOFP -o "$W/churn_unique" "$here/churn_unique.c" &&
    gcc $NOFP -o "$W/tiny_malloc" "$here/tiny_malloc.c" || exit 1
cpu_ms() { # heaplens ARGS...: the CPU milliseconds of one traced run
    /usr/bin/time -f "%U %S" -o "$W/time" "$@" >/dev/null 2>&1
    rm -f "$W"/t.*.hl
    awk '{printf "%d\n", ($1 + $2) * 1000}' "$W/time"
}
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
printf '%-14s %10s %10s %7s\n' workload "A cpu ms" "B cpu ms" "B/A"
args_of() { # workload name -> its program and arguments
    case $1 in
    churn_deep) echo "churn_deep 1" ;;
    tree_paths) echo "tree 19 --recursive" ;;
    procs) echo "/bin/sh $here/procs.sh $W/tiny_malloc 200" ;;
    *) echo "$1" ;;
    esac
}
for name in ${WORKLOADS:-churn_deep tree cxx churn_mix}; do
    w=$(args_of "$name")
    a=() b=()
    for _ in $(seq "$ROUNDS"); do
        p=$W/$w
        [ "$name" = procs ] && p=$w
        a+=("$(cpu_ms "$A/heaplens" run -q -o "$W/t.%p.hl" -- $p)")
        b+=("$(cpu_ms "$B/heaplens" run -q -o "$W/t.%p.hl" -- $p)")
    done
    ma=$(median "${a[@]}") mb=$(median "${b[@]}")
    printf '%-14s %10s %10s %7s   A: %s  B: %s\n' "$name" "$ma" "$mb" \
        "$(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.3f", b / a }')" "${a[*]}" "${b[*]}"
done
