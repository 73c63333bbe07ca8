# SPDX-License-Identifier: MIT
# bench/lib.sh - what the bench scripts share; sourced (run.sh sets its own paths first).
# The workloads are built -O2 -g without frame pointers: the tracers must unwind with CFI.
NOFP="-O2 -g -fomit-frame-pointer"

log() { printf '%s\n' "$*" >&2; }

# bench_setup NAME [BUILD_DIR]: the paths and knobs of a bench script beside run.sh. Sets root,
# build (absolute), B (its bench directory, made), heaplens, rounds (ROUNDS, default 3), depth
# (DEPTH, default 64 as in run.sh) and BENCH_NAME; 1 when heaplens is not built there.
bench_setup() {
    BENCH_NAME=$1
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    build=${2:-build}
    case $build in /*) ;; *) build=$root/$build ;; esac
    B=$build/bench
    heaplens=$build/heaplens
    rounds=${ROUNDS:-3}
    depth=${DEPTH:-64}
    [ -x "$heaplens" ] || { log "$BENCH_NAME: $heaplens not built"; return 1; }
    mkdir -p "$B"
}

# fresh_copy BUILD DIR: the CLI and its agents as BUILD has them, in new files at DIR. On a virtual
# machine one and the same agent file ran cxx a tenth slower or faster from where its pages
# happened to lie in memory (byte-identical code, 0.53 against 0.46 s until it was copied
# anew): a bench that runs a fresh copy each round takes its medians over as many placements.
fresh_copy() {
    rm -rf "$2" && mkdir -p "$2/agents/x86_64" "$2/agents/i686" &&
        cp "$1/heaplens" "$1/libheaplens.so" "$2/" &&
        ln -s ../../libheaplens.so "$2/agents/x86_64/libheaplens.so" || return 1
    if [ -f "$1/libheaplens32.so" ]; then
        cp "$1/libheaplens32.so" "$2/" && ln -s ../../libheaplens32.so "$2/agents/i686/libheaplens.so"
    fi
}

# build_one OUT SRC COMPILER FLAGS...: (re)builds OUT from SRC when it is missing or older.
build_one() {
    local out=$1 src=$2
    shift 2
    if [ ! -x "$out" ] || [ "$src" -nt "$out" ]; then
        "$@" -o "$out" "$src" || { log "${BENCH_NAME:-bench}: cannot build $out"; rm -f "$out"; return 1; }
    fi
}
