# SPDX-License-Identifier: MIT
# bench/lib.sh - what the bench scripts share; sourced, after they set `log`.
# The workloads are built -O2 -g without frame pointers: the tracers must unwind with CFI.
NOFP="-O2 -g -fomit-frame-pointer"

# build_one OUT SRC COMPILER FLAGS...: (re)builds OUT from SRC when it is missing or older.
build_one() {
    local out=$1 src=$2
    shift 2
    if [ ! -x "$out" ] || [ "$src" -nt "$out" ]; then
        "$@" -o "$out" "$src" || { log "${BENCH_NAME:-bench}: cannot build $out"; rm -f "$out"; return 1; }
    fi
}
