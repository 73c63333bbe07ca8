#!/usr/bin/env bash
# The cost of the exit-time leak scan on 10M live blocks (~1 GiB), next to LeakSanitizer's
# check of the same program built with clang -fsanitize=leak. Each pair differs only in the
# scan, so the difference of wall times is the scan's cost.
#   bench/scan_vs_lsan.sh [BUILD_DIR]
set -eu
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mktemp -d)
gcc -O2 -g -o "$OUT/scan_big" "$ROOT/bench/scan_big.c"
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); awk -v a="$s" -v b="$e" "BEGIN{printf \"%.2f\", b - a}"; }
echo "native:                     $(t "$OUT/scan_big") s"
echo "heaplens agent, no scan:    $(t env HEAPLENS_SCAN=0 HEAPLENS_OUTPUT="$OUT/a.hl" LD_PRELOAD="$ROOT/$BUILD/libheaplens.so" "$OUT/scan_big") s"
echo "heaplens agent, with scan:  $(t env HEAPLENS_OUTPUT="$OUT/b.hl" LD_PRELOAD="$ROOT/$BUILD/libheaplens.so" "$OUT/scan_big") s"
if command -v clang >/dev/null && clang -O2 -g -fsanitize=leak -o "$OUT/scan_big_lsan" "$ROOT/bench/scan_big.c" 2>/dev/null; then
    echo "LSan, detect_leaks=0:       $(t env LSAN_OPTIONS=detect_leaks=0 "$OUT/scan_big_lsan") s"
    echo "LSan, leak check at exit:   $(t "$OUT/scan_big_lsan") s"
else
    echo "LSan: clang with -fsanitize=leak not available (libclang-rt-14-dev)"
fi
rm -rf "$OUT"
