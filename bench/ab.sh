#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/ab.sh BUILD_A BUILD_B [ROUNDS] - two builds of heaplens on the same workloads, run in
# alternation (A, B, A, B...) so that both see the same machine: the CPU time (user + system, of
# the program and the agent's writer) and the wall time of each run, their medians, and B/A.
# For a change on the hot path: BUILD_A from the base commit (git archive BASE | tar -x -C DIR
# && make -C DIR), BUILD_B this tree's. WORKLOADS="churn_unique tree_paths ..." picks others:
# churn_deep, tree, cxx, churn_mix (the default), churn_unique, tree_paths (tree --recursive, 19
# levels here), procs (procs.sh: 200 short programs, each traced; the CPU of all of them),
# procs_bash (the same run by bash, whose children allocate before their exec), spawn
# (spawn.c: 200 of them started by fork then exec from a heap of 100,000 blocks),
# sqlite (sqlite3 :memory: inserting 200k rows, when sqlite3 is installed), cc1 (gcc's cc1 -O2
# on gen_c.py's 30,000-line file) and make (make -s -j2 of this project, a fresh copy before
# each run, untimed; every child traced).
# "paired" is the median of each round's own B/A wall-time ratio, the two runs of a round back
# to back (which first alternates): this machine's speed drifts by a tenth over minutes, which
# moves both medians apart and a round's two runs together. Times come from measure.c (to the
# tenth of a millisecond: /usr/bin/time's hundredths of a second were 4% of a 250 ms run).
# Each round runs fresh copies of both builds (lib.sh: fresh_copy says why).
set -u
A=$(cd "$1" && pwd) && B=$(cd "$2" && pwd) || { echo "usage: bench/ab.sh BUILD_A BUILD_B [ROUNDS]" >&2; exit 2; }
ROUNDS=${3:-9}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" # fresh_copy
W=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-ab.XXXXXX")
trap 'rm -rf "$W"' EXIT
gcc $NOFP -pthread -o "$W/churn_deep" "$here/churn_deep.c" &&
    gcc $NOFP -o "$W/tree" "$here/tree.c" && gcc $NOFP -o "$W/churn_mix" "$here/churn_mix.c" &&
    g++ $NOFP -o "$W/cxx" "$here/cxx.cc" && gcc $NOFP -o "$W/churn_unique" "$here/churn_unique.c" &&
    gcc $NOFP -o "$W/tiny_malloc" "$here/tiny_malloc.c" && gcc $NOFP -o "$W/spawn" "$here/spawn.c" &&
    gcc -O2 -o "$W/measure" "$here/measure.c" ||
    exit 1
run_ms() { # heaplens ARGS...: "CPU wall" milliseconds of one traced run (stdin: $IN)
    "$W/measure" -i "${IN:-/dev/null}" -o /dev/null -e /dev/null -r "$W/time" -- "$@" >/dev/null 2>&1
    rm -f "$W"/t.*.hl
    sed 's/.*wall=\([0-9.]*\).*cpu=\([0-9.]*\).*/\2 \1/' "$W/time" |
        awk '{printf "%.1f %.1f\n", $1 * 1000, $2 * 1000}'
}
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }

printf '%-14s %10s %10s %7s %10s %10s %7s %7s\n' workload "A cpu ms" "B cpu ms" "B/A" "A wall ms" \
    "B wall ms" "B/A" paired
args_of() { # workload name -> its program and arguments
    case $1 in
    churn_deep) echo "$W/churn_deep 1" ;;
    tree_paths) echo "$W/tree 19 --recursive" ;;
    procs) echo "/bin/sh $here/procs.sh $W/tiny_malloc 200" ;;
    procs_bash) echo "bash $here/procs.sh $W/tiny_malloc 200" ;;
    spawn) echo "$W/spawn 200 100000 $W/tiny_malloc" ;;
    sqlite) echo "sqlite3 :memory:" ;;
    cc1) echo "$(gcc -print-prog-name=cc1) -quiet -O2 $W/cc1.c -o /dev/null" ;;
    make) echo "make -s -j2 -C $W/make_run" ;;
    *) echo "$W/$1" ;;
    esac
}
prepare() { # workload name: what it needs made before the rounds; 1 when it cannot run
    case $1 in
    sqlite)
        command -v sqlite3 >/dev/null || { echo "$1: sqlite3 is not installed"; return 1; }
        [ -s "$W/sqlite.sql" ] || python3 "$here/gen_sql.py" 200000 >"$W/sqlite.sql" ;;
    cc1) [ -s "$W/cc1.c" ] || python3 "$here/gen_c.py" 30000 >"$W/cc1.c" ;;
    make)
        mkdir -p "$W/make_src" && git -C "$here/.." archive HEAD | tar -x -C "$W/make_src" ;;
    esac
}
before_run() { # workload name: what each run needs made anew (untimed)
    [ "$1" = make ] && rm -rf "$W/make_run" && cp -a "$W/make_src" "$W/make_run"
    return 0
}
for name in ${WORKLOADS:-churn_deep tree cxx churn_mix}; do
    w=$(args_of "$name")
    IN=/dev/null
    prepare "$name" || continue
    [ "$name" = sqlite ] && IN=$W/sqlite.sql
    ca=() cb=() wa=() wb=() pairs=()
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a ? b / a : 0 }'; }
    for r in $(seq "$ROUNDS"); do
        fresh_copy "$A" "$W/A" && fresh_copy "$B" "$W/B" || exit 1
        order="A B"
        [ $((r % 2)) = 0 ] && order="B A"
        for which in $order; do
            before_run "$name" || exit 1
            if [ "$which" = A ]; then
                read -r c wl < <(IN=$IN run_ms "$W/A/heaplens" run -q -o "$W/t.%p.hl" -- $w)
                ca+=("$c") wa+=("$wl") round_a=$wl
            else
                read -r c wl < <(IN=$IN run_ms "$W/B/heaplens" run -q -o "$W/t.%p.hl" -- $w)
                cb+=("$c") wb+=("$wl") round_b=$wl
            fi
        done
        pairs+=("$(ratio "$round_a" "$round_b")")
    done
    mca=$(median "${ca[@]}") mcb=$(median "${cb[@]}") mwa=$(median "${wa[@]}") mwb=$(median "${wb[@]}")
    paired=$(printf '%s\n' "${pairs[@]}" | sort -g | sed -n "$(((${#pairs[@]} + 1) / 2))p")
    printf '%-14s %10s %10s %7s %10s %10s %7s %7s\n' "$name" "$mca" "$mcb" "$(ratio "$mca" "$mcb")" \
        "$mwa" "$mwb" "$(ratio "$mwa" "$mwb")" "$paired"
done
