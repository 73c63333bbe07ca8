#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/ablate.sh BUILD_DIR ROUNDS PROGRAM [ARGS...] - what each of heaplens's costly defaults
# costs one program: its wall time natively, under `heaplens run` with every default, with one
# of them turned off at a time (the exit scan, release stacks, guard bytes, stacks deeper than
# one frame) and with all four off (and no control socket): what recording itself costs.
# Variants run in alternation, ROUNDS rounds, from a fresh copy of the build each round (lib.sh:
# fresh_copy says why); prints each one's median and its ratio to native. Times come from
# measure.c. STDIN=FILE feeds the program FILE (sqlite3 reads its script so). Examples:
#   bench/ablate.sh build 5 build/bench/tree
#   STDIN=build/bench/sqlite_200k.sql bench/ablate.sh build 3 sqlite3 :memory:
set -u
B=$(cd "${1:?usage: bench/ablate.sh BUILD_DIR ROUNDS PROGRAM [ARGS...]}" && pwd) || exit 2
ROUNDS=${2:?usage: bench/ablate.sh BUILD_DIR ROUNDS PROGRAM [ARGS...]}
shift 2
[ $# -gt 0 ] || { echo "usage: bench/ablate.sh BUILD_DIR ROUNDS PROGRAM [ARGS...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" # fresh_copy
W=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-ablate.XXXXXX")
trap 'rm -rf "$W"' EXIT
gcc -O2 -o "$W/measure" "$here/measure.c" || exit 1
input=${STDIN:-/dev/null}
[ -r "$input" ] || { echo "ablate.sh: cannot read STDIN=$input" >&2; exit 2; }

variants=(native all no-scan no-release-stacks guard-0 depth-1 recording-only)
options() { # the heaplens run options of a variant (none for native)
    case $1 in
    all) echo "" ;;
    no-scan) echo "--no-scan" ;;
    no-release-stacks) echo "--no-release-stacks" ;;
    guard-0) echo "--guard=0" ;;
    depth-1) echo "-d 1" ;;
    recording-only) echo "-d 1 --no-scan --no-release-stacks --guard=0 --no-control" ;;
    esac
}
declare -A times
for ((r = 0; r < ROUNDS; r++)); do
    fresh_copy "$B" "$W/hl" || exit 1
    for v in "${variants[@]}"; do
        if [ "$v" = native ]; then
            cmd=("$@")
        else
            # shellcheck disable=SC2207 # the options are single words
            cmd=("$W/hl/heaplens" run -q $(options "$v") -o "$W/t.%p.hl" -- "$@")
        fi
        "$W/measure" -i "$input" -o /dev/null -e /dev/null -r "$W/time" -- "${cmd[@]}" >/dev/null 2>&1
        rm -f "$W"/t.*.hl*
        times[$v]="${times[$v]:-} $(sed 's/.*wall=\([0-9.]*\).*/\1/' "$W/time")"
    done
done
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }
native=$(median ${times[native]})
printf '%-18s %10s %8s\n' variant "wall ms" "x native"
for v in "${variants[@]}"; do
    m=$(median ${times[$v]})
    awk -v v="$v" -v m="$m" -v n="$native" 'BEGIN { printf "%-18s %10.1f %7.2fx\n", v, m * 1000, m / n }'
done
