#!/usr/bin/env bash
# make demo: install what is missing, build, and run heaplens on a program that leaks, then on
# the programs that use the in-program API (examples/api_example.*), with and without it.
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."
make -s deps
make -s all
mkdir -p build/examples
gcc -O1 -g -o build/examples/leaky examples/leaky.c
echo "\$ heaplens run -- build/examples/leaky"
./build/heaplens run -o build/examples/leaky.hl -- build/examples/leaky || true

API="-Iinclude -Lbuild -lheaplens-api -Wl,-rpath,$PWD/build"
gcc -O1 -g -rdynamic -o build/examples/api_example examples/api_example.c $API
g++ -O1 -g -o build/examples/api_example_cxx examples/api_example.cc $API
gfortran -O1 -g -Jbuild/examples -o build/examples/api_example_f include/heaplens.f90 \
    examples/api_example.f90 $API
for p in api_example api_example_cxx api_example_f; do
    echo
    echo "\$ build/examples/$p                  # without heaplens: the API says \"not traced\""
    "build/examples/$p"
    echo "\$ heaplens run -- build/examples/$p"
    ./build/heaplens run -o "build/examples/$p.hl" -- "build/examples/$p" || true
done
