#!/usr/bin/env bash
# make demo: install what is missing, build, and run heaplens on a program that leaks.
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."
make -s deps
make -s all
mkdir -p build/examples
gcc -O1 -g -o build/examples/leaky examples/leaky.c
echo "\$ heaplens run -- build/examples/leaky"
./build/heaplens run -o build/examples/leaky.hl -- build/examples/leaky || true
