#!/bin/sh
# SPDX-License-Identifier: MIT
# procs.sh TINY [N] - start N short programs one after the other (default 500): half /bin/true,
# half TINY (bench/tiny_malloc.c). A build system or a test suite in miniature: what it
# measures is the cost of each process's start and end.
tiny=$1
n=${2:-500}
i=0
while [ $i -lt $n ]; do
    /bin/true || exit 1
    "$tiny" || exit 1
    i=$((i + 2))
done
