#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh BUILD_DIR - integration tests: every program of tests/programs runs under
# `heaplens run --json`, and the numbers of its JSON report are checked against what the program
# is known to do (tests/integration/check.py does the JSON side). Also the CLI's behaviour on bad
# input. One line per check: "PASS name" or "FAIL name: reason"; the last line is
# "N passed, N failed"; exit status 1 when anything failed.
#
# Numbers are exact wherever the program decides them. Ranges are used only for allocations made
# by a runtime library the program cannot control, each with its reason next to it.
set -u

BUILD=$(cd "${1:-build}" && pwd) || { echo "run.sh: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
PROGS=$BUILD/programs
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK=$HERE/check.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-it.XXXXXX")
PASSED=0
FAILED=0
TIMEOUT=20 # seconds per command; every case takes well under one normally
ulimit -c 0 2>/dev/null # the signal cases must not leave core files behind

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }

# check CASE JSON EXPR... : assertions on a JSON report, one line each (see check.py).
check() {
    local out
    out=$(python3 "$CHECK" "$@" 2>&1)
    [ -n "$out" ] && echo "$out"
    PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
    FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
}

# same CASE A.json B.json KEY... : the two reports agree on those keys.
same() {
    local out
    out=$(python3 "$CHECK" --same "$@" 2>&1)
    echo "$out"
    PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
    FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
}

# hl CASE [run options...] -- PROG [ARGS...]
# Runs `heaplens run --json $D/report.json -o $D/trace.hl OPTIONS -- $PROGS/PROG ARGS` in a
# fresh directory $D=$WORK/CASE. Sets D, J (JSON path), T (trace path), ST (exit status); stdout
# and stderr are in $D/stdout and $D/stderr. With the option --default-trace, no -o is given (the
# trace gets its default name in $D).
hl() {
    local name=$1
    shift
    D=$WORK/$name
    J=$D/report.json
    T=$D/trace.hl
    mkdir -p "$D"
    local opts=(-o "$T")
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        if [ "$1" = "--default-trace" ]; then opts=(); else opts+=("$1"); fi
        shift
    done
    shift
    local prog=$1
    shift
    # The outer redirection keeps bash's own "Segmentation fault" job notices off the output.
    { (cd "$D" && exec timeout -k 5 "$TIMEOUT" "$HL" run --json "$J" "${opts[@]}" -- "$PROGS/$prog" "$@" \
        >"$D/stdout" 2>"$D/stderr" </dev/null); } 2>/dev/null
    ST=$?
}

# figure_within PROG KEY MORE : the "KEY N" line PROG printed under heaplens (in $D/stdout) is
# less than MORE above the one it prints run natively (a figure of its own: memory in KiB, page
# faults).
figure_within() {
    local native traced
    native=$("$PROGS/$1" | sed -n "s/^$2 //p")
    traced=$(sed -n "s/^$2 //p" "$D/stdout")
    if [ -n "$native" ] && [ -n "$traced" ] && [ $((traced - native)) -lt "$3" ]; then
        pass "$1: $2 $native natively, $traced traced"
    else
        fail "$1" "$2 ${native:-?} natively, ${traced:-?} traced (less than $3 more expected)"
    fi
}

# report CASE TRACE JSON : `heaplens report --json JSON TRACE`; sets RST, output in $D/report.*
report() {
    (timeout -k 5 "$TIMEOUT" "$HL" report --json "$3" "$2" >"$D/report.stdout" 2>"$D/report.stderr" </dev/null)
    RST=$?
}

expect_status() { # CASE EXPECTED [ACTUAL=$ST]
    local got=${3:-$ST}
    if [ "$got" = "$2" ]; then pass "$1: exit status $2"; else fail "$1: exit status" "expected $2, got $got$(stderr_hint)"; fi
}

# The last heaplens diagnostic of the current case, to explain a failure.
stderr_hint() {
    local line
    line=$(grep -m1 '^heaplens:' "$D/stderr" 2>/dev/null)
    [ -n "$line" ] && printf ' (%s)' "$line"
}

expect_stdout() { # CASE TEXT : the program's stdout under heaplens is TEXT and a newline, exactly
    if printf '%s\n' "$2" | cmp -s - "$D/stdout"; then
        pass "$1: stdout"
    else
        fail "$1: stdout" "expected '$2\\n', got '$(head -c 200 "$D/stdout" | tr '\n' '|')'"
    fi
}

# bad_input CASE CMD... : the command must fail cleanly: exit status 1..127 (no crash, no
# signal), and stderr exactly one line, starting with "heaplens:".
bad_input() {
    local name=$1
    shift
    D=$WORK/$name
    mkdir -p "$D"
    (cd "$D" && timeout -k 5 "$TIMEOUT" "$@" >"$D/stdout" 2>"$D/stderr" </dev/null)
    local st=$? lines first
    lines=$(wc -l <"$D/stderr")
    first=$(head -n1 "$D/stderr")
    if [ "$st" -ge 1 ] && [ "$st" -le 127 ]; then
        pass "$name: fails with status $st"
    else
        fail "$name: exit status" "expected 1..127, got $st"
    fi
    if [ "$lines" -eq 1 ] && [ "${first#heaplens:}" != "$first" ] && [ "$(tail -c1 "$D/stderr")" = "" ]; then
        pass "$name: one 'heaplens:' line on stderr"
    else
        fail "$name: stderr" "expected exactly one line starting with 'heaplens:', got $lines line(s): $(head -c 300 "$D/stderr" | tr '\n' '|')"
    fi
}

if [ ! -x "$HL" ] || [ ! -f "$BUILD/libheaplens.so" ]; then
    fail "setup" "$HL or $BUILD/libheaplens.so is missing (make all)"
    echo "$PASSED passed, $FAILED failed"
    exit 1
fi

# dlopen_plugin needs build/programs/libplugin.so, which `make integration` does not list among
# its prerequisites: build it here, with the Makefile's own command, when missing or stale.
PLUGIN_SRC=$HERE/../programs/plugin.c
if [ -f "$PLUGIN_SRC" ] && { [ ! -f "$PROGS/libplugin.so" ] || [ "$PLUGIN_SRC" -nt "$PROGS/libplugin.so" ]; }; then
    mkdir -p "$PROGS"
    gcc -O2 -g -fPIC -shared -o "$PROGS/libplugin.so" "$PLUGIN_SRC" || fail "setup" "cannot build $PROGS/libplugin.so"
fi

# ================================================================================================
# The interposed C functions
# ================================================================================================
hl alloc_basic -- alloc_basic
expect_status alloc_basic 0
expect_stdout alloc_basic "alloc_basic done"
check alloc_basic "$J" \
    "calls['malloc'] == 11" "calls['calloc'] == 6" "calls['free'] == 15" \
    "totals['allocations'] == 17" "totals['frees'] == 15" "totals['bytes_allocated'] == 3578" \
    "totals['peak_heap_bytes'] == 2501" "totals['threads'] == 1" \
    "ln('definite') == 2" "lb('definite') == 1078" \
    "rec('definite', 'leak_via_malloc') == {'bytes': 1001, 'blocks': 1, 'records': 1}" \
    "rec('definite', 'leak_via_calloc') == {'bytes': 77, 'blocks': 1, 'records': 1}" \
    "frame('definite', 'leak_via_malloc')['file'].endswith('alloc_basic.c')" \
    "frame('definite', 'leak_via_malloc')['line'] > 0" \
    "names('malloc_ten') == []" "names('calloc_five') == []" \
    "0 <= totals['peak_time_ns'] <= end['time_ns']" \
    "lb('indirect') == 0" "lb('possible') == 0" "lb('reachable') == 0" "lb('unscanned') == 0" \
    "errors == []" "scanned == True" "end['how'] == 'exit'" "end['value'] == 0" \
    "process['exe'].endswith('/alloc_basic')" "process['fork_child'] == False" "children == []"
# Every line heaplens adds to stderr carries its prefix (the program writes nothing there).
if [ -s "$D/stderr" ] && ! grep -qv '^==heaplens== ' "$D/stderr" && [ "$(tail -c1 "$D/stderr")" = "" ]; then
    pass "alloc_basic: every stderr line is prefixed '==heaplens== '"
else
    fail "alloc_basic: stderr prefix" "unprefixed line: $(grep -m1 -v '^==heaplens== ' "$D/stderr")"
fi
if grep -q 'leak_via_malloc' "$D/stderr"; then pass "alloc_basic: text report names leak_via_malloc"; else fail "alloc_basic: text report" "leak_via_malloc not on stderr"; fi
BASIC_TRACE=$T
BASIC_JSON=$J
# heaplens report re-reads the trace into the same report.
report alloc_basic "$BASIC_TRACE" "$D/re.json"
expect_status "alloc_basic report" 0 "$RST"
# (end.exit_status is the run's own observation of the process; the trace cannot know it.)
same "alloc_basic: report == run" "$BASIC_JSON" "$D/re.json" process end.how end.value scanned totals calls leaks leak_records errors
if [ "$(grep '^==heaplens== ' "$D/report.stderr" | grep -c 'definitely lost')" = "$(grep -c 'definitely lost' "$D/stderr")" ] &&
    grep -q leak_via_calloc "$D/report.stderr"; then
    pass "alloc_basic: report prints the leak records again"
else
    fail "alloc_basic: report text" "$(grep -c 'definitely lost' "$D/report.stderr") 'definitely lost' lines vs $(grep -c 'definitely lost' "$D/stderr") from run"
fi

# Another allocator underneath (preloaded after the agent, as `LD_PRELOAD=lib heaplens run`
# does): it serves the blocks, heaplens still sees and judges every call. Each is skipped when
# its Debian package (libjemalloc2, libtcmalloc-minimal4, libmimalloc2.0) is not installed.
for lib in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
    path=/usr/lib/x86_64-linux-gnu/$lib
    if [ ! -e "$path" ]; then
        skip "alloc_basic under $lib" "$path not installed"
        continue
    fi
    LD_PRELOAD=$path hl "alloc_basic_$lib" -- alloc_basic
    expect_status "alloc_basic under $lib" 0
    check "alloc_basic under $lib" "$J" "calls['malloc'] >= 11" "calls['calloc'] >= 6" \
        "rec('definite', 'leak_via_malloc') == {'bytes': 1001, 'blocks': 1, 'records': 1}" \
        "rec('definite', 'leak_via_calloc') == {'bytes': 77, 'blocks': 1, 'records': 1}" \
        "names('malloc_ten') == []" "errors == []"
    LD_PRELOAD=$path hl "err_double_free_$lib" -- err_double_free
    expect_status "err_double_free under $lib" 0
    check "err_double_free under $lib" "$J" "errs('double_free', 'free_it_again') == 1"
    LD_PRELOAD=$path HEAPLENS_HEADER_MIN=0 hl "alloc_headers_$lib" --no-follow -- alloc_headers
    expect_stdout "alloc_headers under $lib (every block with a header)" "alloc_headers ok"
    check "alloc_headers under $lib (every block with a header)" "$J" "errors == []" \
        "rec('definite', 'leak_big') == {'bytes': 5000, 'blocks': 1, 'records': 1}"
    # 8- and 16-byte blocks packed closer than glibc ever does: live blocks share a granule of
    # the live table's direct map and go to its second level; every verdict must still hold
    LD_PRELOAD=$path hl "alloc_tiny_$lib" -- alloc_tiny
    expect_status "alloc_tiny under $lib" 0
    check "alloc_tiny under $lib" "$J" \
        "rec('definite', 'leak_tiny') == {'bytes': 80, 'blocks': 10, 'records': 1}" \
        "rec('reachable', 'fill')['blocks'] == 4096" "rec('reachable', 'fill')['bytes'] == 4096 * 16" \
        "errs('double_free', 'free_tiny_again') == 1" "len(errors) == 1"
done
# The same under glibc: one granule per block
hl alloc_tiny -- alloc_tiny
expect_status "alloc_tiny" 0
check "alloc_tiny" "$J" "rec('definite', 'leak_tiny') == {'bytes': 80, 'blocks': 10, 'records': 1}" \
    "rec('reachable', 'fill')['blocks'] == 4096" "errs('double_free', 'free_tiny_again') == 1" \
    "len(errors) == 1"

hl alloc_basic_depth1 -d 1 -- alloc_basic
expect_status "alloc_basic -d 1" 0
check "alloc_basic -d 1" "$J" "maxdepth() == 1" \
    "rec('definite', 'leak_via_malloc') == {'bytes': 1001, 'blocks': 1, 'records': 1}" \
    "records[0]['stack'][0]['function'] in ('leak_via_malloc', 'leak_via_calloc')"

hl alloc_realloc -- alloc_realloc
expect_status alloc_realloc 0
# realloc(NULL, n) is an allocation only; each realloc of a block is one allocation + one free.
check alloc_realloc "$J" \
    "calls['realloc'] == 3" "calls['reallocarray'] == 2" "calls['malloc'] == 0" "calls['free'] == 0" \
    "totals['allocations'] == 5" "totals['frees'] == 3" "totals['bytes_allocated'] == 1350" \
    "totals['peak_heap_bytes'] == 1000" \
    "ln('definite') == 2" "lb('definite') == 170" \
    "rec('definite', 'realloc_shrink') == {'bytes': 10, 'blocks': 1, 'records': 1}" \
    "rec('definite', 'reallocarray_grow') == {'bytes': 160, 'blocks': 1, 'records': 1}" \
    "names('realloc_from_null') == []" "names('reallocarray_from_null') == []" \
    "lb('reachable') == 0" "errors == []"

# realloc and reallocarray of NULL count as themselves (memcheck's view names them malloc:
# dropin.sh): realloc 1, reallocarray 3, 4 allocations, 1 free, 96 bytes lost in 3 blocks.
hl realloc_null -- realloc_null
expect_status realloc_null 0
check realloc_null "$J" "calls['realloc'] == 1" "calls['reallocarray'] == 3" "calls['malloc'] == 0" \
    "totals['allocations'] == 4" "totals['frees'] == 1" "lb('definite') == 96" "ln('definite') == 3" \
    "rec('definite', 'lose_realloc_null')['bytes'] == 40" "rec('definite', 'lose_reallocarray_grow')['bytes'] == 32"

# Blocks that carry the agent's header: by default those of 256 bytes and more, with
# HEAPLENS_HEADER_MIN=0 every one, with --guard=0 none. Freed and realloc'd by their thread, by
# another one, and (--no-follow) by an untraced child; the program checks contents, zeroes,
# alignment and usable sizes itself.
for mode in default min0 noguard; do
    case $mode in
    default) hl alloc_headers --no-follow -- alloc_headers ;;
    min0) HEAPLENS_HEADER_MIN=0 hl alloc_headers_min0 --no-follow -- alloc_headers ;;
    noguard) hl alloc_headers_noguard --no-follow --guard=0 -- alloc_headers ;;
    esac
    expect_status "alloc_headers ($mode)" 0
    expect_stdout "alloc_headers ($mode)" "alloc_headers ok"
    check "alloc_headers ($mode)" "$J" "errors == []" \
        "rec('definite', 'leak_big') == {'bytes': 5000, 'blocks': 1, 'records': 1}" \
        "rec('definite', 'leak_small') == {'bytes': 300, 'blocks': 1, 'records': 1}" \
        "calls['realloc'] == 4" "calls['reallocarray'] == 2"
done

hl alloc_aligned -- alloc_aligned
expect_status alloc_aligned 0
# pvalloc(105) is a whole page: the block is 4096 bytes.
check alloc_aligned "$J" \
    "calls['posix_memalign'] == 2" "calls['aligned_alloc'] == 2" "calls['memalign'] == 2" \
    "calls['valloc'] == 2" "calls['pvalloc'] == 2" "calls['free'] == 5" "calls['malloc'] == 0" \
    "totals['allocations'] == 10" "totals['frees'] == 5" "totals['bytes_allocated'] == 14540" \
    "ln('definite') == 5" "lb('definite') == 4888" \
    "rec('definite', 'leak_via_posix_memalign')['bytes'] == 201" \
    "rec('definite', 'leak_via_aligned_alloc')['bytes'] == 384" \
    "rec('definite', 'leak_via_memalign')['bytes'] == 103" \
    "rec('definite', 'leak_via_valloc')['bytes'] == 104" \
    "rec('definite', 'leak_via_pvalloc')['bytes'] == 4096" \
    "names('posix_memalign_freed') == []" "names('pvalloc_freed') == []" \
    "lb('reachable') == 0" "errors == []"

hl alloc_mmap -- alloc_mmap
expect_status alloc_mmap 0
# mremap is recorded as a munmap of the old range plus an mmap of the new one.
check alloc_mmap "$J" \
    "calls['mmap'] == 5" "calls['munmap'] == 4" "totals['mmaps'] == 5" "totals['munmaps'] == 4" \
    "totals['allocations'] == 0" "totals['frees'] == 0" "lb('definite') == 0" "errors == []"

# ================================================================================================
# C++
# ================================================================================================
hl cxx_new_delete -- cxx_new_delete
expect_status cxx_new_delete 0
# malloc: libstdc++ allocates its emergency exception pool with malloc at start-up, and releases
# it at exit when asked (__gnu_cxx::__freeres, as memcheck asks); 0..1 so a libstdc++ without it
# passes too. The failed nothrow new[] is no call.
check cxx_new_delete "$J" \
    "calls['new'] == 10" "calls['new[]'] == 4" "calls['delete'] == 8" "calls['delete[]'] == 3" \
    "calls['malloc'] in range(0, 2)" "calls['free'] == calls['malloc']" "lb('reachable') == 0" \
    "ln('definite') == 3" "lb('definite') == 336" \
    "rec('definite', 'cxx_leak_plain_new') == {'bytes': 40, 'blocks': 1, 'records': 1}" \
    "rec('definite', 'cxx_leak_new_array') == {'bytes': 104, 'blocks': 1, 'records': 1}" \
    "rec('definite', 'cxx_leak_aligned') == {'bytes': 192, 'blocks': 1, 'records': 1}" \
    "names('cxx_plain_pairs') == []" "names('cxx_aligned_pair') == []" "names('cxx_sized_pair') == []" \
    "errors == []"

# 40,002 of its own; glibc's dprintf may add one buffer of its own (freed again).
hl daemon_fds -- daemon_fds daemon.log
expect_status daemon_fds 0
if [ "$(cat "$D/daemon.log" 2>/dev/null)" = "daemon log line" ]; then
    pass "daemon_fds: the program's own log holds only its line"
else
    fail "daemon_fds: the program's own log holds only its line" "$(head -c 200 "$D/daemon.log" | od -c | head -3)"
fi
check daemon_fds "$J" "totals['allocations'] in (40002, 40003)" "lb('definite') == 333" "ln('definite') == 2" \
    "j['trace_complete'] == True"

# glibc's single-threaded fast paths: kept while only the program's one thread runs (the agent's
# writer thread is not the program's), left once the program makes a thread of its own.
hl single_threaded -- single_threaded
expect_status single_threaded 0
want=$(cd "$D" && "$PROGS/single_threaded" 2>/dev/null)
got=$(cat "$D/stdout" 2>/dev/null)
if [ "$got" = "$want" ] && grep -q "after-mallocs libc=1 exe=1" <<<"$got" &&
    grep -q "after-own-thread libc=0 exe=0" <<<"$got"; then
    pass "single_threaded: glibc's flag as without heaplens"
else
    fail "single_threaded: glibc's flag as without heaplens" "native: $(echo $want) / traced: $(echo $got)"
fi

hl signals_view -- signals_view
expect_status signals_view 143
# natively under timeout too, as hl runs it: timeout sets its own SIGINT, which exec resets
want=$(cd "$D" && timeout -k 5 "$TIMEOUT" "$PROGS/signals_view" 2>/dev/null)
got=$(cat "$D/stdout" 2>/dev/null)
if [ "$got" = "$want" ] && grep -q "sigaction 2: default" <<<"$got"; then
    pass "signals_view: dispositions seen as without heaplens"
else
    fail "signals_view: dispositions seen as without heaplens" "native: $(echo $want) / traced: $(echo $got)"
fi
check signals_view "$J" "end['how'] == 'signal'" "end['value'] == 15" "scanned == True" \
    "sum(rec(k, 'leak_before_term')['bytes'] for k in ('definite', 'possible', 'reachable')) == 77"

hl threads_many -- threads_many
expect_status threads_many 0
# 1,000 threads: 2,001,000 calls of the program's own, stdout's buffer, one DTV (calloc) per
# thread stack. As under memcheck, glibc's exit-time releases (libc_exit.c) leave nothing but
# the 500 leaks: stdout's buffer and the cached stacks' vectors are released.
check threads_many "$J" "calls['malloc'] == 2001001" "totals['threads'] >= 1000" \
    "lb('definite') == 5000" "ln('definite') == 500" "rec('definite', 'worker')['blocks'] == 500" \
    "lb('reachable') == 0" "totals['frees'] == totals['allocations'] - 500"

# 2,200 threads one after another: from thread index 2,048 on, records no longer fit a trailer
# and go to the direct map. Verdicts as memcheck's (5,280 B in 220 blocks definitely lost, 880
# blocks reachable, nothing possibly lost: the TLS vector glibc keeps with the last thread's
# cached stack is released at exit, as memcheck has glibc do).
hl threads_serial -- threads_serial
expect_status threads_serial 0
check threads_serial "$J" "calls['malloc'] == 4400" "lb('definite') == 5280" "ln('definite') == 220" \
    "rec('definite', 'worker')['blocks'] == 220" "rec('reachable', 'worker')['blocks'] == 880" \
    "rec('reachable', 'worker')['bytes'] == 21120" "lb('possible') == 0" "errors == []"
# One temporary each, and one of main's: the TLS vector of the last thread's stack, main's
# latest allocation (pthread_create's), which glibc releases at exit (__libc_freeres).
if "$HL" report --summary "$T" 2>&1 | grep -q "temporary allocations: 2,201 "; then
    pass "threads_serial: 2,201 temporary allocations, owners past index 2,047 kept"
else
    fail threads_serial "$("$HL" report --summary "$T" 2>&1 | grep temporary)"
fi

# Threads that ended before the program: glibc's __libc_freeres, which memcheck runs before its
# leak check, releases the TLS vectors of the stacks glibc keeps cached (libc_exit.c), and the
# exit scan takes them as released. memcheck on this program: 5 allocations, 1 release; 72 bytes
# in 3 blocks definitely lost, and 272 in 1 possibly lost (the vector of the thread that ended
# unjoined, whose stack is still in use). Before, the cached vector was possibly lost too.
hl threads_ended -- threads_ended
expect_status threads_ended 0
check threads_ended "$J" "sum(calls.values()) - calls.get('free', 0) == 5" "calls['free'] == 1" \
    "lb('definite') == 72" "ln('definite') == 3" "rec('definite', 'leak_in_thread')['blocks'] == 3" \
    "lb('possible') == 272" "ln('possible') == 1" "rec('possible', 'allocate_dtv')['blocks'] == 1" \
    "lb('reachable') == 0" "lb('indirect') == 0" "errors == []"
# Ended by a signal, memcheck has glibc release nothing: 0 releases, 544 bytes in 2 blocks
# possibly lost (the cached vector and the unjoined thread's).
hl threads_ended_term -- threads_ended term
expect_status threads_ended_term 143
check threads_ended_term "$J" "end['how'] == 'signal'" "calls['free'] == 0" \
    "lb('definite') == 72" "lb('possible') == 544" "rec('possible', 'allocate_dtv')['blocks'] == 2"
# Streams open at exit: glibc leaves the buffers it allocated to __libc_freeres, which memcheck
# runs; heaplens takes them as released too. memcheck on this program: 4 allocations, 2
# releases (stdout's buffer and the open file's), the two FILEs (472 bytes each) still
# reachable; the buffer the program gave one stream is not a heap block.
hl stdio_exit -- stdio_exit "$D"
expect_status stdio_exit 0
check stdio_exit "$J" "calls['malloc'] == 4" "calls['free'] == 2" "lb('reachable') == 944" \
    "ln('reachable') == 2" "rec('reachable', 'main')['blocks'] == 2" "lb('definite') == 0" \
    "lb('possible') == 0" "errors == []"

# What glibc keeps to the end of the process (a locale, NSS, the time zone, iconv, a library
# loaded and unloaded, stdout's buffer): at the end of exit(), with no other thread left, glibc
# releases it itself (__libc_freeres), as memcheck has it do. memcheck on this program: 250
# allocations, 248 frees; 40 bytes definitely lost, 24 still reachable, nothing else.
libc_own_out="written through the buffer"
hl libc_own -- libc_own
expect_status libc_own 0
check libc_own "$J" "totals['frees'] == totals['allocations'] - 2" "totals['allocations'] > 100" \
    "lb('definite') == 40" "ln('definite') == 1" "lb('reachable') == 24" "ln('reachable') == 1" \
    "lb('possible') == 0" "lb('indirect') == 0" "errors == []"
[ "$(cat "$D/stdout")" = "$libc_own_out" ] && pass "libc_own: output as natively" ||
    fail libc_own "stdout: $(head -c 200 "$D/stdout")"
# Through _exit no stream is flushed, and __libc_freeres would flush them: glibc is not asked, the
# program writes nothing, as natively; glibc's blocks stay (still reachable, two of the loader's
# possibly lost, as under memcheck --run-libc-freeres=no).
hl libc_own_underscore -- libc_own underscore
expect_status libc_own_underscore 0
check libc_own_underscore "$J" "totals['frees'] < totals['allocations'] - 100" \
    "lb('definite') == 40" "lb('reachable') > 24"
[ ! -s "$D/stdout" ] && pass "libc_own_underscore: nothing written, as natively" ||
    fail libc_own_underscore "stdout: $(head -c 200 "$D/stdout")"
# A thread still alive at exit could use what glibc would free: it is not asked; the program ends
# at once, its output and status as natively.
hl libc_own_thread -- libc_own thread
expect_status libc_own_thread 0
check libc_own_thread "$J" "totals['frees'] < totals['allocations'] - 100" "lb('definite') == 40"
[ "$(cat "$D/stdout")" = "$libc_own_out" ] && pass "libc_own_thread: output as natively" ||
    fail libc_own_thread "stdout: $(head -c 200 "$D/stdout")"
# stdout a pipe nobody reads: the flush at exit (glibc's, here within __libc_freeres) raises
# SIGPIPE, which ends the program as natively; the trace says so, whole.
hl libc_own_pipe -- libc_own pipe
expect_status libc_own_pipe 141
check libc_own_pipe "$J" "end['how'] == 'signal'" "end['value'] == 13" "j['trace_complete']" \
    "lb('definite') == 40"
# A child of clone(CLONE_VM) (a process sharing the memory, which /proc/self/task does not list)
# still runs when main's exit() ends: glibc is not asked to release what the child still uses;
# 300 ms later it reads the locale's codeset as natively (UTF-8, not the C locale's).
cs=$WORK/libc_own_clonevm.codeset
rm -f "$cs"
hl libc_own_clonevm -- libc_own clonevm "$cs"
expect_status libc_own_clonevm 0
for _ in $(seq 1 100); do [ -s "$cs" ] && break; sleep 0.05; done
[ "$(cat "$cs" 2>/dev/null)" = "UTF-8" ] && pass "libc_own_clonevm: the clone(CLONE_VM) child's locale intact after main's exit" ||
    fail libc_own_clonevm "the child read codeset '$(cat "$cs" 2>/dev/null)'"
# heaplens memcheck --run-libc-freeres=no, --run-cxx-freeres=no: glibc's blocks, and libstdc++'s
# exception pool (a C++ program's one block in use at exit, where libstdc++ has one), stay.
mc_in_use() { # BYTES IN USE AT EXIT under heaplens memcheck OPTIONS... -- PROGRAM
    "$HL" memcheck "$@" 2>&1 >/dev/null </dev/null | sed -n 's/.*in use at exit: \([0-9,]*\) bytes.*/\1/p' | tr -d ,
}
a=$(mc_in_use "$PROGS/libc_own") b=$(mc_in_use --run-libc-freeres=no "$PROGS/libc_own")
[ "$a" = 64 ] && [ -n "$b" ] && [ "$b" -gt 64 ] &&
    pass "memcheck --run-libc-freeres: 64 bytes in use at exit, $b with =no" ||
    fail "memcheck --run-libc-freeres" "in use at exit: '$a', with =no '$b'"
a=$(mc_in_use "$PROGS/cxx_new_delete") b=$(mc_in_use --run-cxx-freeres=no "$PROGS/cxx_new_delete")
[ "$a" = 336 ] && [ -n "$b" ] && [ "$b" -gt 336 ] &&
    pass "memcheck --run-cxx-freeres: 336 bytes in use at exit (the leaks), $b with =no" ||
    fail "memcheck --run-cxx-freeres" "in use at exit: '$a', with =no '$b'"

hl stack_shapes -- stack_shapes
# 16 leaves of a 4-level recursion: 16 records, each through exactly 4 descend frames, no two
# with the same path (file:line of every frame).
check stack_shapes "$J" "lb('definite') == 16 * 24" "rec('definite', 'leak_at_leaf')['records'] == 16" \
    "all(sum(1 for f in r['stack'] if f.get('function') == 'descend') == 4 for r in records if r.get('kind') == 'definitely_lost')" \
    "len({tuple((f.get('function'), f.get('line')) for f in r['stack']) for r in records if r.get('kind') == 'definitely_lost'}) == 16"

# 2^17 paths (about 400K stack nodes): the agent's stack table grows twice while the program
# runs; every path still has its own stack, and the 16 kept blocks their exact paths.
hl stack_shapes_many -- stack_shapes 17
check stack_shapes_many "$J" "totals['allocations'] == 131072" "lb('definite') == 16 * 24" \
    "rec('definite', 'leak_at_leaf')['records'] == 16" \
    "all(sum(1 for f in r['stack'] if f.get('function') == 'descend') == 17 for r in records if r.get('kind') == 'definitely_lost')" \
    "len({tuple((f.get('function'), f.get('line')) for f in r['stack']) for r in records if r.get('kind') == 'definitely_lost'}) == 16"
if "$HL" report --summary "$T" 2>&1 | grep -q "from 131,072 call sites"; then
    pass "stack_shapes_many: 131,072 distinct call sites"
else
    fail "stack_shapes_many" "$("$HL" report --summary "$T" 2>&1 | grep allocations:)"
fi

# The agent's unwinder against libgcc's (HEAPLENS_UNWIND_CFI=0), on programs built without
# frame pointers whose stacks come in every order the agent reuses earlier walks in: the same
# allocation stacks (leak records) and release stacks (double frees), frame by frame.
# same_stacks CASE NEEDS PROGRAM [ARGS...]: both runs' reports alike, and NEEDS (a Python
# expression of leak_stacks, doubles and fast, the fast run's) true of the fast one, so the case
# is there.
same_stacks() {
    local name=$1 needs=$2
    shift 2
    hl "$name" -- "$@"
    expect_stdout "$name" "$1 done"
    local fast=$J
    export HEAPLENS_UNWIND_CFI=0
    hl "${name}_general" -- "$@"
    unset HEAPLENS_UNWIND_CFI
    expect_stdout "${name}_general" "$1 done"
    local diff
    diff=$(python3 - "$fast" "$J" "$needs" 2>&1 <<'PY' || echo "the comparison failed"
import collections, json, sys
def frames(stack):
    return tuple((f.get("function"), f.get("file"), f.get("line"), f.get("module")) for f in stack)
def view(path):
    d = json.load(open(path))
    # Blocks by allocation stack, whatever their verdict: a stale pointer left on the stack by
    # one unwinder's frames and not the other's may move a block between kinds.
    leaks = collections.Counter()
    for r in d["leak_records"]:
        leaks[(r["bytes"] // max(r["blocks"], 1), frames(r["stack"]))] += r["blocks"]
    errors = collections.Counter((e["kind"], frames(e["stack"]), frames(e.get("alloc_stack", [])),
                                  frames(e.get("release_stack", []))) for e in d["errors"])
    return leaks, errors
fast, general = view(sys.argv[1]), view(sys.argv[2])
leak_stacks = list(fast[0])
doubles = [e for e in fast[1].elements() if e[0] == "double_free"]
if not eval(sys.argv[3]):
    print("the fast run is not what the case needs (%s): %d leak stacks, %d double frees, "
          "release stacks of %s frames" % (sys.argv[3], len(leak_stacks), len(doubles),
                                           sorted({len(e[3]) for e in doubles})))
elif fast != general:
    a = [x for x in list(fast[0]) + list(fast[1]) if x not in general[0] and x not in general[1]]
    def short(x):
        return " | ".join(" ".join("%s:%s" % (f[0], f[2]) for f in part[:4]) for part in x
                          if isinstance(part, tuple))
    print("%d records differ; the first: %s" % (len(a), short(a[0]) if a else "counts"))
PY
)
    if [ -z "$diff" ]; then
        pass "$name: the same allocation and release stacks as libgcc's unwinder"
    else
        fail "$name" "$diff"
    fi
}
# 42 double frees: 28 from chain, 14 from tail_releases (depths 7 to 13, twice); each release
# stack as deep as a release keeps (HL_RELEASE_DEPTH, 12).
same_stacks unwind_mix \
    "len(leak_stacks) >= 100 and len(doubles) == 42 and all(len(e[3]) == 12 for e in doubles)" \
    unwind_mix
# A walk going on past a cut one, where the %rbp it has is another frame's: 8 lost blocks whose
# stacks, cut at the default depth (32 frames, which the case is built for), reach main (a walk
# that took that %rbp ended them at framed, 31 frames).
same_stacks unwind_guard \
    "sum(n for (size, f), n in fast[0].items() if size == 24 and len(f) == 32 and f[-1][0] == 'main') == 8" \
    unwind_guard
# Random chains across the release and default depths, three seeds: about 450 leak stacks and
# 1,600 double frees each, some released by tail calls after cut walks (the agent takes the
# frames those have and walks on).
for seed in 1 2 3; do
    same_stacks "unwind_random_$seed" "len(leak_stacks) >= 300 and len(doubles) >= 1000" \
        unwind_random 20000 "$seed"
done
# 4,096 places that allocate, each a return address of its own: the rule cache grows twice while
# the walks go on (checked below); 512 leaks, each with a stack of its own.
same_stacks unwind_sites "len(leak_stacks) == 512 and sum(fast[0].values()) == 512" unwind_sites

# Every stack the unwinder takes from earlier walks (found whole among the recent ones, or with
# frames copied, or going on past a cut walk) walked again from nothing by the agent itself
# (the unwind_check setting): none differs, at least MIN were checked, and at least PAST walks
# went on past a cut one (checked, or walked again whole for want of %rbp).
# unwind_checked CASE MIN PAST PROGRAM [ARGS...]
unwind_checked() {
    local name=$1 min=$2 past=$3
    shift 3
    export HEAPLENS_UNWIND_CHECK=1
    hl "$name" -- "$@"
    unset HEAPLENS_UNWIND_CHECK
    local line made differed resumed again
    line=$(grep -h "unwind check: [0-9]* stacks" "$D/stderr" | tail -1)
    made=$(sed -n 's/.*unwind check: \([0-9]*\) stacks.*/\1/p' <<<"$line")
    differed=$(sed -n 's/.*walked again, \([0-9]*\) differed.*/\1/p' <<<"$line")
    resumed=$(sed -n 's/.*(\([0-9]*\) had gone on past.*/\1/p' <<<"$line")
    again=$(sed -n 's/.*; \([0-9]*\) walks past one.*/\1/p' <<<"$line")
    if [ -n "$made" ] && [ "$made" -ge "$min" ] && [ "$differed" = 0 ] &&
        [ -n "$resumed" ] && [ -n "$again" ] && [ $((resumed + again)) -ge "$past" ] &&
        ! grep -q "they part at" "$D/stderr"; then
        pass "$name: $made stacks taken from earlier walks ($resumed past a cut walk, $again more walked whole), each the same walked anew"
    else
        fail "$name" "expected at least $min checked, $past past a cut walk, none differing: $(grep -h "unwind check" "$D/stderr" | head -3)"
    fi
}
unwind_checked unwind_mix_checked 10000 30 unwind_mix
unwind_checked unwind_guard_checked 10 1 unwind_guard
unwind_checked unwind_random_checked 140000 10000 unwind_random 20000 4
unwind_checked stack_shapes_checked 200000 0 stack_shapes 17
unwind_checked threads_many_checked 1000000 0 threads_many
unwind_checked unwind_sites_checked 20000 0 unwind_sites
if grep -q "rule cache of 16384 entries at most" "$D/stderr"; then
    pass "unwind_sites_checked: the rule cache grew from 1,024 entries to 16,384 while walking"
else
    fail "unwind_sites_checked" "expected the rule cache at 16,384 entries: $(grep -h "unwind check" "$D/stderr" | head -1)"
fi

hl cxx_heuristics -- cxx_heuristics
expect_status cxx_heuristics 0
# memcheck 3.19 on the same program: 0 lost of any kind, these 213 bytes still reachable.
check cxx_heuristics "$J" "lb('definite') == 0" "lb('indirect') == 0" "lb('possible') == 0" \
    "rec('reachable', 'make_objects') == {'bytes': 213, 'blocks': 4, 'records': rec('reachable', 'make_objects')['records']}"

hl cxx_containers -- cxx_containers
expect_status cxx_containers 0
# string: 101 + 201 B; vector<int>: capacities 1..128 = 8 blocks; map: 50 nodes of 40 B.
check cxx_containers "$J" \
    "calls['new'] == 60" "calls['delete'] == 60" "calls['new[]'] == 0" "calls['delete[]'] == 0" \
    "calls['malloc'] in range(0, 2)" \
    "lb('definite') == 0" "lb('indirect') == 0" "lb('possible') == 0" \
    "names('strings_workload') == []" "names('vector_workload') == []" "names('map_workload') == []" \
    "errors == []"

# A thread still waiting at exit: neither libstdc++ nor glibc is asked to release what it keeps
# (the thread could still use it; libc_own thread for glibc's): the pool, where libstdc++ has
# one, stays still reachable.
hl cxx_thread_exit -- cxx_thread_exit
expect_status cxx_thread_exit 0
check cxx_thread_exit "$J" "calls['free'] == 1" "ln('reachable') == calls['malloc'] - 1" "calls['new[]'] == 1" \
    "lb('definite') == 56" "rec('definite', 'lose_block') == {'bytes': 56, 'blocks': 1, 'records': 1}" \
    "ln('possible') == 1" "errors == []"

hl cxx_exception -- cxx_exception
expect_status cxx_exception 0
# The C++ runtime mallocs and frees each exception object: malloc 3 (+1 for libstdc++'s
# start-up emergency pool, released at exit: see cxx_new_delete), free as many.
check cxx_exception "$J" \
    "calls['new'] == 9" "calls['delete'] == 9" "calls['new[]'] == 3" "calls['delete[]'] == 0" \
    "calls['malloc'] in range(3, 5)" "calls['free'] == calls['malloc']" \
    "ln('definite') == 3" "lb('definite') == 231" \
    "rec('definite', 'throwing_worker') == {'bytes': 231, 'blocks': 3, 'records': 1}" \
    "lb('indirect') == 0" "errors == []"

# ================================================================================================
# Threads
# ================================================================================================
hl threads_alloc -- threads_alloc
expect_status threads_alloc 0
# calloc: glibc makes each new thread's DTV with calloc (0..4, reused stacks may keep theirs),
# and each is released at exit with its cached stack, as memcheck has glibc do (libc_exit.c).
check threads_alloc "$J" \
    "calls['malloc'] == 37" "calls['free'] == 33 + calls['calloc']" "calls['calloc'] in range(0, 5)" \
    "totals['threads'] == 5" \
    "ln('definite') == 4" "lb('definite') == 4006" \
    "rec('definite', 'per_thread_leak') == {'bytes': 4006, 'blocks': 4, 'records': 1}" \
    "names('worker_alloc_batch') == []" "errors == []"

hl threads_churn -- threads_churn
expect_status threads_churn 0
# glibc callocs a DTV per new thread and frees it (free) when it drops a cached thread stack:
# those frees come on top of the program's 164000, at most one per calloc.
check threads_churn "$J" \
    "calls['malloc'] == 164016" "calls['free'] - 164000 in range(0, calls['calloc'] + 1)" \
    "totals['threads'] == 25" \
    "rec('definite', 'short_lived_leak') == {'bytes': 160, 'blocks': 16, 'records': 1}" \
    "lb('definite') == 160" "lb('indirect') == 0" "lb('reachable') == 0" \
    "lb('possible') == 0" \
    "names('churn_pairs') == []" "names('churn_handoff') == []" "errors == []" \
    "0 < totals['peak_time_ns'] <= end['time_ns']"
# Every block with a header: 24 threads set and clear marks that share words, concurrently.
HEAPLENS_HEADER_MIN=0 hl threads_churn_headers -- threads_churn
expect_status "threads_churn (headers)" 0
check "threads_churn (headers)" "$J" "calls['malloc'] == 164016" \
    "rec('definite', 'short_lived_leak') == {'bytes': 160, 'blocks': 16, 'records': 1}" \
    "lb('definite') == 160" "lb('reachable') == 0" "errors == []"

# Rings stay small where a thread's events come in bursts the writer keeps up with (ring.h): 32
# such threads, each making more events than the largest ring holds, once took 384 KiB each
# (21 MiB over the program's own peak; 10 with small rings). One thread flat out meanwhile
# grows its ring to the largest: its events are all there.
hl threads_bursts -- threads_bursts
expect_status threads_bursts 0
# Each thread's leak is lost; now and then (1 run in 16) a copy of a pointer into one is left
# where the thread ended, and that one is possibly lost, as memcheck would say.
check threads_bursts "$J" "calls['malloc'] - 488032 in range(0, 16)" \
    "calls['free'] - 488000 in range(0, calls['malloc'] - 488032 + calls['calloc'] + 1)" \
    "rec('definite', 'leak_once')['blocks'] + rec('possible', 'leak_once')['blocks'] == 32" \
    "rec('definite', 'leak_once')['bytes'] + rec('possible', 'leak_once')['bytes'] == 3200" \
    "names('leak_once') in (['definitely_lost'], ['definitely_lost', 'possibly_lost'])" \
    "errors == []"
figure_within threads_bursts vmhwm_kb 16384

# A header block fills its glibc chunk to the byte (layout.h): header, block and guard rounded up
# to what a chunk of 16k bytes holds, 16k - 8 (to 16 first, a block of 32 bytes took 80; 64 hold
# it); a block of 0 bytes as one of 1. Every block with a header: by default only those of 256
# bytes and more have one.
HEAPLENS_HEADER_MIN=0 hl headed_chunks -- chunk_sizes 24
expect_status headed_chunks 0
bad=$(awk '{ n = $1 ? $1 : 1; want = int((n + 16 + 8 + 8 + 15) / 16) * 16;
             if ($2 != want) print $1 " bytes: a chunk of " $2 ", not " want }' "$D/stdout")
if [ "$(wc -l <"$D/stdout")" = 13 ] && [ -z "$bad" ]; then
    pass "headed_chunks: each header block fills its chunk"
else
    fail headed_chunks "${bad:-$(cat "$D/stdout")}"
fi

# A block under 256 bytes keeps its record in its glibc chunk's last word (live_header.c:
# trailers): block, 8 guard bytes and that word, rounded to what a chunk of 16k bytes holds
# (16k - 8); with trailers off the block and its guard only. Its double free names the first
# release, kept by the releasing thread once the word is glibc's again.
hl trailed_chunks -- chunk_sizes 8 twice
expect_status trailed_chunks 0
bad=$(awk '$1 < 256 { want = int(($1 + 8 + 8 + 8 + 15) / 16) * 16;
             if ($2 != want) print $1 " bytes: a chunk of " $2 ", not " want }' "$D/stdout")
if [ "$(awk '$1 < 256' "$D/stdout" | wc -l)" = 11 ] && [ -z "$bad" ]; then
    pass "trailed_chunks: each block and its trailer fill its chunk"
else
    fail trailed_chunks "${bad:-$(cat "$D/stdout")}"
fi
check trailed_chunks "$J" "calls['malloc'] >= 14" "errs('double_free', 'release_again') == 1" \
    "errs_release('double_free', 'release_first') == 1" "len(errors) == 1" \
    "errors[0]['block_size'] == 8"
HEAPLENS_TRAILERS=0 hl trailed_chunks_off -- chunk_sizes 8 twice
expect_status trailed_chunks_off 0
bad=$(awk '$1 < 256 { want = int(($1 + 8 + 8 + 15) / 16) * 16; if (want < 32) want = 32;
             if ($2 != want) print $1 " bytes: a chunk of " $2 ", not " want }' "$D/stdout")
if [ "$(awk '$1 < 256' "$D/stdout" | wc -l)" = 11 ] && [ -z "$bad" ]; then
    pass "trailed_chunks with HEAPLENS_TRAILERS=0: blocks and guards only"
else
    fail trailed_chunks_off "${bad:-$(cat "$D/stdout")}"
fi
check trailed_chunks_off "$J" "errs('double_free', 'release_again') == 1" \
    "errs_release('double_free', 'release_first') == 1" "len(errors) == 1"

# 600,000 allocation sites, each used once: the writer's site table stops at a share of the
# program's memory and numbering stops (sites.c); releases are written in full from then on, and
# the report is whole. The table went to 12 MiB before (22 MiB more than native at the peak).
hl sites_many -- sites_many
expect_status sites_many 0
check sites_many "$J" "calls['malloc'] == 600000" "calls['free'] == 600000" "errors == []" \
    "lb('definite') == 0" "ln('definite') == 0"
figure_within sites_many vmhwm_kb 10240

# The writer makes a rising heap present ahead of the program (live.c), a sixteenth of its
# growth at most: 64 MiB taken at once and barely touched stay mostly not resident (4 MiB of
# them made present; all 64 would be a program harmed).
hl sparse_brk -- sparse_brk
expect_status sparse_brk 0
figure_within sparse_brk vmrss_kb 12288

# heaplens run reads the trace while its program runs (cli/run_follow.c), chunk by chunk as the
# agent writes them, cut wherever the file ends at each look: its report is the one `heaplens
# report` makes of the finished trace (but for the exit status, which only the run knows).
hl run_phases -- run_phases
expect_status run_phases 0
check run_phases "$J" "lb('definite') == 6 * 10 * 48" "lb('reachable') == 6 * 5 * 64" \
    "calls['malloc'] == 6 * 5015" "totals['frees'] == 6 * 5000" "j['trace_complete'] == True"
report run_phases "$T" "$D/again.json"
expect_status "run_phases: report of its trace" 0 "$RST"
same "run_phases: the report made while it ran is the finished trace's" "$J" "$D/again.json" \
    process end scanned heap_traced trace_complete totals calls leaks leak_records errors
# ================================================================================================
# fork, exec, dlopen
# ================================================================================================
# The unwinder's state is not a fork child's (os_wipe_on_fork): a fork leaves the parent's pages
# of it writable, and the child walks its stacks from an empty state. Natively the parent takes
# about 4 page faults a fork, under the agent about 18; with the state copied at each fork,
# about 48. The last child's 48 leaks, one to a level of recursion: levels 1-31 each a stack
# through child_leaks, 32-48 one stack of 32 frames of descend (the depth).
hl fork_walks -- fork_walks
expect_status fork_walks 0
figure_within fork_walks parent_faults_per_fork 24
check fork_walks "$J" "len(children) == 20" "lb('definite') == 0"
CHILD_TRACE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["children"][-1]["trace"])' "$J" 2>/dev/null)
case "$CHILD_TRACE" in /*) ;; ?*) CHILD_TRACE=$D/$CHILD_TRACE ;; esac
report fork_walks "$CHILD_TRACE" "$D/child.json"
expect_status "fork_walks: report of the last child" 0 "$RST"
check "fork_walks (last child)" "$D/child.json" "process['fork_child'] == True" \
    "lb('definite') == 48 * 40" "maxdepth() == 32" \
    "rec('definite', 'descend') == {'bytes': 48 * 40, 'blocks': 48, 'records': 32}" \
    "rec('definite', 'child_leaks') == {'bytes': 31 * 40, 'blocks': 31, 'records': 31}"
hl fork_child -- fork_child
expect_status fork_child 0
PARENT_JSON=$J
CHILD_PID=$(sed -n 's/^child \([0-9]*\)$/\1/p' "$D/stdout")
check fork_child "$PARENT_JSON" \
    "rec('definite', 'parent_only_leak') == {'bytes': 200, 'blocks': 1, 'records': 1}" \
    "names('child_only_leak') == []" "lb('definite') == 200" "process['fork_child'] == False" \
    "len(children) == 1" "[c['pid'] for c in children] == [${CHILD_PID:-0}]"
CHILD_TRACE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["children"][0]["trace"])' "$PARENT_JSON" 2>/dev/null)
case "$CHILD_TRACE" in /*) ;; ?*) CHILD_TRACE=$D/$CHILD_TRACE ;; esac
if [ -n "$CHILD_TRACE" ] && [ -s "$CHILD_TRACE" ]; then
    pass "fork_child: the child's trace exists"
    report fork_child "$CHILD_TRACE" "$D/child.json"
    expect_status "fork_child: report of the child" 0 "$RST"
    PARENT_PID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["process"]["pid"])' "$PARENT_JSON" 2>/dev/null)
    check "fork_child (child trace)" "$D/child.json" \
        "process['fork_child'] == True" "process['pid'] == ${CHILD_PID:-0}" "process['ppid'] == ${PARENT_PID:-0}" \
        "rec('definite', 'child_only_leak') == {'bytes': 300, 'blocks': 1, 'records': 1}" \
        "names('parent_only_leak') == []" "lb('definite') == 300" "end['how'] == 'exit'" "end['value'] == 0"
else
    fail "fork_child: child trace" "no trace file for the child (children: '$CHILD_TRACE')"
fi

# One -o name for a run of many processes (a build, a test suite): each takes the first free
# suffix, past a thousand of them, and no earlier file is touched. 1100 programs, each traced.
D=$WORK/many_names
mkdir -p "$D"
(cd "$D" && timeout -k 5 120 "$HL" run -q -o t.hl -- /bin/sh -c \
    'i=0; while [ $i -lt 1100 ]; do /bin/true || exit 1; i=$((i + 1)); done' >"$D/stdout" 2>"$D/stderr" </dev/null)
ST=$?
missing=$(i=1; while [ $i -le 1100 ]; do [ -s "$D/t.hl.$i" ] || echo "t.hl.$i"; i=$((i + 1)); done | head -3)
if [ $ST -eq 0 ] && [ -s "$D/t.hl" ] && [ -z "$missing" ] && [ ! -e "$D/t.hl.1101" ] && [ ! -s "$D/stderr" ]; then
    pass "one -o name, 1100 processes: t.hl, t.hl.1 ... t.hl.1100, no line on stderr"
else
    fail "one -o name, 1100 processes" "status $ST, missing: ${missing:-none}, stderr: $(head -c 300 "$D/stderr")"
fi
"$HL" report -q --json "$D/last.json" "$D/t.hl.1100" >/dev/null 2>&1 &&
    check "many_names (the 1100th trace)" "$D/last.json" "end['how'] == 'exit'" "end['value'] == 0"
# Earlier files with a gap among them (the root's own name is replaced, as on any run): the
# child's trace takes a free suffix; none of the earlier files changes.
for n in u.hl.1 u.hl.2 u.hl.3 u.hl.4 u.hl.6; do echo "earlier $n" >"$D/$n"; done
(cd "$D" && timeout -k 5 "$TIMEOUT" "$HL" run -q -o u.hl -- "$PROGS/fork_child" >/dev/null 2>&1 </dev/null)
kept=1
for n in u.hl.1 u.hl.2 u.hl.3 u.hl.4 u.hl.6; do [ "$(cat "$D/$n")" = "earlier $n" ] || kept=0; done
new=$(cd "$D" && ls u.hl.5 u.hl.7 2>/dev/null | head -1)
if [ $kept = 1 ] && [ -n "$new" ] && "$HL" report -q --json "$D/u.json" "$D/$new" >/dev/null 2>&1; then
    pass "one -o name, a gap among earlier traces: the child's is $new, the five earlier files as they were"
    check "many_names (the child's trace)" "$D/u.json" "process['fork_child'] == True"
else
    fail "one -o name, a gap among earlier traces" "kept=$kept new='$new': $(ls "$D" | grep '^u' | tr '\n' ' ')"
fi

# A fork child's trace begins at its first heap event. One that execs without an event (a spawn)
# leaves no trace of its own: the child's pid has one trace, the exec'd image's, which names the
# parent. One that ends without an event still has its trace, written at its end: the parent's
# 2,001 blocks, the 2,000 its array holds still reachable (94,616 B), the one it leaked (123 B)
# definitely lost in the child too. One with an event
# before its exec has its trace, with the blocks it inherited, as before, and no thread of
# heaplens's before that exec: its writer waits for a child that lives on (one that allocates
# for 60 ms has it, and its trace samples the RSS while it lives, as does one that makes a thread
# and then falls idle); one that falls idle has its events written at its end. A task of the
# child made by clone(CLONE_VM) starts no writer (the child would wait for it for ever); a child
# killed by SIGKILL before its writer started has every event it made in its file.

# sampled_before MODE MS: the child's time line has an RSS sample before MS ms into its trace.
# RSS comes from the writer's samples (the last one, at the child's end, comes later): seen
# that early, the writer ran while the child lived.
sampled_before() {
    "$HL" report --timeline --buckets 20 "$D/t.$child.hl" >"$D/child.timeline" 2>&1
    local n
    n=$(awk -v ms="$2" '$1 ~ /^[0-9.]+$/ && $1 + 0 < ms && $5 != "0" { n++ } END { print n + 0 }' "$D/child.timeline")
    if [ "$n" -gt 0 ]; then
        pass "fork_quiet $1: the child's writer sampled its RSS while it ran"
    else
        fail "fork_quiet $1: the child's writer sampled its RSS while it ran" "$(head -8 "$D/child.timeline")"
    fi
}
for mode in exec exit event lives idle thread clone killed; do
    hl fork_quiet_$mode -o "t.%p.hl" -- fork_quiet $mode
    expect_status "fork_quiet $mode" 0
    child=$(sed -n 's/^child \([0-9]*\)$/\1/p' "$D/stdout")
    parent=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["process"]["pid"])' "$J" 2>/dev/null)
    traces=$(cd "$D" && ls t.${child:-none}.hl* 2>/dev/null | tr '\n' ' ')
    case $mode in
    exec) want="t.$child.hl " ;;
    exit) want="t.$child.hl " ;;
    event) want="t.$child.hl t.$child.hl.1 " ;;
    lives | idle | thread | clone | killed) want="t.$child.hl " ;;
    esac
    if [ -n "$child" ] && [ "$traces" = "$want" ]; then
        pass "fork_quiet $mode: the child's traces are $want"
    else
        fail "fork_quiet $mode: the child's traces" "expected '$want', got '$traces'"
        continue
    fi
    report "fork_quiet $mode" "$D/t.$child.hl" "$D/child.json"
    case $mode in
    exec)
        check "fork_quiet exec (the exec'd image)" "$D/child.json" \
            "process['exe'].endswith('/exec_target')" "process['ppid'] == ${parent:-0}" \
            "process['fork_child'] == False" "end['how'] == 'exit'" "end['value'] == 5" \
            "names('inherited_leak') == []" "lb('definite') == 222" ;;
    exit)
        check "fork_quiet exit (the child)" "$D/child.json" \
            "process['fork_child'] == True" "process['ppid'] == ${parent:-0}" \
            "end['how'] == 'exit'" "end['value'] == 3" "j['trace_complete'] == True" \
            "totals['allocations'] == 0" "totals['in_use_blocks'] == 2001" \
            "rec('definite', 'inherited_leak') == {'bytes': 123, 'blocks': 1, 'records': 1}" \
            "lb('definite') == 123" "lb('reachable') == 94616" ;;
    event)
        check "fork_quiet event (the child)" "$D/child.json" \
            "process['fork_child'] == True" "end['how'] == 'exec'" "calls['malloc'] == 1" \
            "calls['free'] == 1" "j['leaks']['unscanned']['blocks'] == 2001" ;;
    lives)
        check "fork_quiet lives (the child)" "$D/child.json" \
            "process['fork_child'] == True" "end['how'] == 'exit'" "end['value'] == 3" \
            "j['trace_complete'] == True" "calls['malloc'] == 60" "calls['free'] == 60"
        sampled_before lives 50 ;;
    thread)
        check "fork_quiet thread (the child)" "$D/child.json" \
            "process['fork_child'] == True" "end['how'] == 'exit'" "end['value'] == 3" \
            "j['trace_complete'] == True" "calls['malloc'] == 11" \
            "calls['free'] == 11 + calls['calloc']" "totals['threads'] == 2"
        sampled_before thread 45 ;;
    clone) # a clone(CLONE_VM) task of the child neither starts a writer nor hangs it
        check "fork_quiet clone (the child)" "$D/child.json" \
            "process['fork_child'] == True" "end['how'] == 'exit'" "end['value'] == 3" \
            "j['trace_complete'] == True" "calls['malloc'] >= 20001" ;;
    killed) # SIGKILLed before it had a writer: each of its events was written as it was made
        check "fork_quiet killed (the child)" "$D/child.json" \
            "process['fork_child'] == True" "j['trace_complete'] == False" \
            "calls['malloc'] == 5" "totals['in_use_blocks'] == 2006" ;;
    idle)
        check "fork_quiet idle (the child)" "$D/child.json" \
            "process['fork_child'] == True" "end['how'] == 'exit'" "end['value'] == 3" \
            "j['trace_complete'] == True" "calls['malloc'] == 1" "totals['in_use_blocks'] == 2002" \
            "lb('reachable') == 94616 + 77" ;;
    esac
done

# A fork while other threads allocate: each of fork_busy's 100 children holds its parent's blocks
# (about 1,030), and its exit scan judges each. A block some thread was recording at the fork is
# in the child whole or not at all: the blocks of the child's leak records add up to the blocks
# its trace has in use, each record with a stack. (Before the fix, 2 to 9 children in 100 had a
# verdict on a block their trace never named, with the stack of the slot's earlier block.)
hl fork_busy -o "t.%p.hl" -- fork_busy 100
expect_status "fork_busy" 0
children=0
torn=""
for f in "$D"/t.*.hl; do
    report "fork_busy child" "$f" "$D/child.json"
    verdict=$(python3 - "$D/child.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
judged = sum(r["blocks"] for r in j["leak_records"])
whole = judged == j["totals"]["in_use_blocks"] and all(r["stack"] for r in j["leak_records"])
print("parent" if not j["process"]["fork_child"] else "whole" if whole and judged > 0 else "torn")
EOF
)
    [ "$verdict" = parent ] && continue
    children=$((children + 1))
    [ "$verdict" = whole ] || torn="$torn $(basename "$f")"
done
if [ "$children" = 100 ] && [ -z "$torn" ]; then
    pass "fork_busy: 100 children, each judges exactly the blocks its trace holds"
else
    fail "fork_busy: every child judges exactly the blocks its trace holds" \
        "$children children; torn:$torn"
fi

# A program that ends with no block of its own live: its exit scan has nothing to judge, reads no
# root, and says so as a full scan would (scanned, nothing lost, no record).
for mode in none freed; do
    hl nothing_live_$mode -- nothing_live $mode
    expect_status "nothing_live $mode" 0
    expect_stdout "nothing_live $mode" "nothing_live done"
    allocs=0
    [ $mode = freed ] && allocs=100
    check "nothing_live $mode" "$J" "scanned == True" "j['trace_complete'] == True" \
        "totals['allocations'] == $allocs" "totals['frees'] == $allocs" \
        "totals['in_use_blocks'] == 0" "lb('definite') == 0" "lb('indirect') == 0" \
        "lb('possible') == 0" "lb('reachable') == 0" "lb('unscanned') == 0" \
        "j['leak_records'] == []" "end['how'] == 'exit'" "end['value'] == 0"
done

hl exec_follow --default-trace -- exec_parent
expect_status "exec_parent" 7
expect_stdout "exec_parent" "exec_parent: exec
exec_target running"
# The JSON describes the last image of the root pid: exec_target.
check "exec_parent" "$J" \
    "process['exe'].endswith('/exec_target')" "end['how'] == 'exit'" "end['value'] == 7" \
    "rec('definite', 'exec_target_leak') == {'bytes': 222, 'blocks': 1, 'records': 1}" \
    "names('exec_parent_leak') == []" "lb('definite') == 222"
n=$(find "$D" -maxdepth 1 -name '*.hl' | wc -l)
if [ "$n" = 2 ]; then pass "exec_parent: one trace per image"; else fail "exec_parent: traces" "expected 2 .hl files (one per image), got $n"; fi

hl exec_nofollow --default-trace --no-follow -- exec_parent
expect_status "exec_parent --no-follow" 7
check "exec_parent --no-follow" "$J" \
    "process['exe'].endswith('/exec_parent')" "end['how'] == 'exec'" "names('exec_target_leak') == []"
n=$(find "$D" -maxdepth 1 -name '*.hl' | wc -l)
if [ "$n" = 1 ]; then pass "exec_parent --no-follow: one trace"; else fail "exec_parent --no-follow: traces" "expected 1 .hl file, got $n"; fi

hl dlopen_plugin -- dlopen_plugin
expect_status dlopen_plugin 0
# ld.so's own allocations for dlopen are released by dlclose or stay reachable from ld.so.
check dlopen_plugin "$J" \
    "rec('definite', 'plugin_leak_buffer') == {'bytes': 777, 'blocks': 1, 'records': 1}" \
    "frame('definite', 'plugin_leak_buffer')['file'].endswith('plugin.c')" \
    "frame('definite', 'plugin_leak_buffer')['line'] > 0" \
    "lb('definite') == 777" "names('plugin_roundtrip') == []" "errors == []"

# ================================================================================================
# Every way out
# ================================================================================================
hl exit_return -- exit_return
expect_status exit_return 3
check exit_return "$J" "end['how'] == 'exit'" "end['value'] == 3" "scanned == True" \
    "rec('definite', 'leak_before_return') == {'bytes': 100, 'blocks': 1, 'records': 1}" "lb('definite') == 100"

hl exit_exit -- exit_exit
expect_status exit_exit 4
check exit_exit "$J" "end['how'] == 'exit'" "end['value'] == 4" "scanned == True" \
    "rec('definite', 'leak_before_exit') == {'bytes': 200, 'blocks': 1, 'records': 1}" "lb('definite') == 200"

hl exit_underscore -- exit_underscore
expect_status exit_underscore 5
check exit_underscore "$J" "end['how'] == 'exit'" "end['value'] == 5" "scanned == True" \
    "rec('definite', 'leak_before_underscore_exit') == {'bytes': 300, 'blocks': 1, 'records': 1}" \
    "lb('definite') == 300"

hl exit_quick -- exit_quick
expect_status exit_quick 6
check exit_quick "$J" "end['how'] == 'exit'" "end['value'] == 6" "scanned == True" \
    "j['trace_complete'] == True" "calls['malloc'] == 16001" "calls['free'] == 16000" \
    "rec('definite', 'leak_before_quick_exit') == {'bytes': 700, 'blocks': 1, 'records': 1}" \
    "lb('definite') == 700" "lb('reachable') == 0"

# exit_group through the C library's syscall(): no handler and no destructor run, but the
# agent takes syscall() and ends the trace as after _exit, scanned and complete.
hl exit_raw -- exit_raw 0
expect_status exit_raw 4
check exit_raw "$J" "end['how'] == 'exit'" "end['value'] == 4" "scanned == True" \
    "j['trace_complete'] == True" "calls['malloc'] == 16000" "calls['free'] == 8000" \
    "lb('definite') == 800000"

# The exit_group instruction itself (Go's runtime): nothing runs in the process, so no scan;
# the trace must say its end is missing, and keep every event older than the writer's flush
# period (the program sleeps 50 ms before it exits).
hl exit_asm -- exit_raw 50 asm
expect_status exit_asm 4
check exit_asm "$J" "end['how'] == 'unknown'" "scanned == False" "j['trace_complete'] == False" \
    "calls['malloc'] == 16000" "calls['free'] == 8000"
if grep -q "the trace has no end" "$D/stderr"; then
    pass "exit_asm: the report says the trace has no end"
else
    fail "exit_asm: the report says the trace has no end" "$(head -c 300 "$D/stderr")"
fi

# Python's multiprocessing.Pool.terminate() ends its workers with SIGTERM at the default action:
# each worker's trace must end with the signal, scanned and complete (the agent's handler).
PY=/usr/bin/python3
if [ -x "$PY" ]; then
    D=$WORK/mp_terminate
    mkdir -p "$D"
    cat >"$D/pool.py" <<'PYEOF'
import multiprocessing as mp, os, time
def work(x):
    held = [bytes(5000 + x) for _ in range(50)]
    time.sleep(30)
if __name__ == "__main__":
    mp.set_start_method("fork")
    pool = mp.Pool(2)
    pool.map_async(work, range(2))
    time.sleep(1.5)
    pool.terminate()
    pool.join()
    print("terminated")
PYEOF
    (cd "$D" && timeout -k 5 60 "$HL" run -q -o "$D/t.%p.hl" -- "$PY" pool.py >"$D/stdout" 2>"$D/stderr")
    expect_status "multiprocessing Pool.terminate" 0 $?
    n_term=0
    for t in "$D"/t.*.hl; do
        line=$("$HL" report --json - "$t" 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
e = j["end"]
print(e["how"], e["value"], j["scanned"], j["trace_complete"])' 2>/dev/null)
        case "$line" in
        "signal 15 True True") n_term=$((n_term + 1)) ;;
        "signal 15"*) fail "multiprocessing worker $t" "ended by SIGTERM but: $line" ;;
        esac
    done
    if [ "$n_term" = 2 ]; then
        pass "multiprocessing Pool.terminate: both workers' traces end with SIGTERM, scanned, complete"
    else
        fail "multiprocessing Pool.terminate" "$n_term worker traces end with SIGTERM, scanned (want 2)"
    fi
else
    skip "multiprocessing Pool.terminate" "no $PY"
fi

hl exit_abort -- exit_abort
expect_status exit_abort 134
check exit_abort "$J" "end['how'] == 'signal'" "end['value'] == 6" "scanned == True" \
    "rec('definite', 'leak_before_abort') == {'bytes': 400, 'blocks': 1, 'records': 1}" "lb('definite') == 400"

hl exit_segv -- exit_segv
expect_status exit_segv 139
check exit_segv "$J" "end['how'] == 'signal'" "end['value'] == 11" "scanned == True" \
    "rec('definite', 'leak_before_segv') == {'bytes': 500, 'blocks': 1, 'records': 1}" "lb('definite') == 500"

hl exit_sigkill -- exit_sigkill
expect_status exit_sigkill 137
check exit_sigkill "$J" "end['how'] == 'unknown'" "scanned == False"
report exit_sigkill "$T" "$D/re.json"
expect_status "exit_sigkill: report of the cut trace" 0 "$RST"
# The program sleeps 300 ms before SIGKILL, ample time for the agent's writer (it drains every
# few ms) to have put the 20 allocations in the trace; they were never scanned.
check "exit_sigkill (report)" "$D/re.json" "end['how'] == 'unknown'" "scanned == False" \
    "totals['allocations'] == 20" "ln('unscanned') == 20" "lb('unscanned') == 12000" "lb('definite') == 0"

# ================================================================================================
# A full disk: tracing stops with one line, the program runs on to its own end and exit status,
# and what was written reads as a trace cut short. (A 64 KiB tmpfs in a private mount namespace.)
# ================================================================================================
D=$WORK/disk_full
mkdir -p "$D"
if unshare -rm true 2>/dev/null; then
    unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs "$1" && cd "$1" &&
        timeout -k 5 "$2" "$3" run -o "$1/t.hl" -- "$4" >"$1.stdout" 2>"$1.stderr" </dev/null
        echo $? >"$1.status"; cp "$1/t.hl" "$1.hl"' sh "$D" "$TIMEOUT" "$HL" "$PROGS/churn_random"
    st=$(cat "$D.status" 2>/dev/null)
    [ "$st" = 0 ] && pass "disk_full: the program's exit status is kept" ||
        fail "disk_full: the program's exit status is kept" "got ${st:-none}"
    grep -q "churn_random done" "$D.stdout" && pass "disk_full: the program ran to its end" ||
        fail "disk_full: the program ran to its end" "$(head -c 200 "$D.stdout")"
    n=$(grep -c "disk full" "$D.stderr")
    [ "$n" = 1 ] && pass "disk_full: one line says the disk is full" ||
        fail "disk_full: one line says the disk is full" "$n lines: $(head -c 300 "$D.stderr")"
    (timeout -k 5 "$TIMEOUT" "$HL" report --summary "$D.hl" >"$D.report" 2>&1)
    rst=$?
    [ "$rst" = 0 ] && grep -q "SUMMARY of" "$D.report" && pass "disk_full: the trace written reads" ||
        fail "disk_full: the trace written reads" "status $rst: $(head -c 300 "$D.report")"
else
    echo "SKIP disk_full: no private mount namespace here (unshare -rm)"
fi

# ================================================================================================
# Heap errors: each reported, and the program carries on to a normal exit
# ================================================================================================
# heap_errors SUFFIX: every heap error case, its names ending in SUFFIX.
heap_errors() {
    local s=$1
    hl "err_double_free$s" -- err_double_free
    expect_status "err_double_free$s" 0
    expect_stdout "err_double_free$s" "err_double_free survived"
    check "err_double_free$s" "$J" "error_kinds() == ['double_free']" "errs('double_free', 'free_it_again') == 1" \
        "errs_alloc('double_free', 'alloc_for_double_free') == 1" "lb('definite') == 0" \
        "errs_release('double_free', 'free_it_once') == 1"
    # Allocation stacks keep -d frames; the stack of the first release keeps its innermost 12.
    hl "err_double_free_deep$s" -d 64 -- err_double_free deep
    check "err_double_free_deep$s" "$J" "error_kinds() == ['double_free']" \
        "errs_release('double_free', 'free_it_once') == 1" "len(errors[0]['release_stack']) == 12" \
        "len(errors[0]['alloc_stack']) > 30" "errors[0]['alloc_stack'][30].get('function') == 'deep_alloc'"
    hl "err_double_free_fast$s" --no-release-stacks -- err_double_free
    check "err_double_free_fast$s" "$J" "error_kinds() == ['double_free']" \
        "errs('double_free', 'free_it_again') == 1" "errs_release('double_free', 'free_it_once') == 0"

    hl "err_free_stack$s" -- err_free_stack
    expect_status "err_free_stack$s" 0
    expect_stdout "err_free_stack$s" "err_free_stack survived"
    check "err_free_stack$s" "$J" "error_kinds() == ['invalid_free']" "errs('invalid_free', 'free_stack_address') == 1"

    hl "err_free_interior$s" -- err_free_interior
    expect_status "err_free_interior$s" 0
    expect_stdout "err_free_interior$s" "err_free_interior survived"
    check "err_free_interior$s" "$J" "error_kinds() == ['invalid_free']" \
        "errs('invalid_free', 'free_interior_pointer') == 1" \
        "totals['allocations'] == 1" "totals['frees'] == 1" "lb('definite') == 0"

    hl "err_mismatch$s" -- err_mismatch
    expect_status "err_mismatch$s" 0
    expect_stdout "err_mismatch$s" "err_mismatch survived"
    check "err_mismatch$s" "$J" "error_kinds() == ['mismatched_free'] * 3" \
        "errs('mismatched_free', 'new_then_free') == 1" "errs_alloc('mismatched_free', 'alloc_with_plain_new') == 1" \
        "errs('mismatched_free', 'malloc_then_delete') == 1" "errs_alloc('mismatched_free', 'alloc_with_malloc') == 1" \
        "errs('mismatched_free', 'newarray_then_delete') == 1" "errs_alloc('mismatched_free', 'alloc_with_new_array') == 1" \
        "errs(None, 'correct_pair') == 0" "lb('definite') == 0"

    hl "err_overflow$s" -- err_overflow
    expect_status "err_overflow$s" 0
    expect_stdout "err_overflow$s" "err_overflow survived"
    # One overflow found when the block is freed (stack: the free), one at exit (block still live).
    check "err_overflow$s" "$J" "error_kinds() == ['overflow', 'overflow']" \
        "errs('overflow', 'release_overflowed') == 1" "errs_alloc('overflow', 'overflow_then_free') == 1" \
        "errs_alloc('overflow', 'overflow_kept') == 1" "errs_alloc('overflow', 'write_in_bounds') == 0"

    hl "err_overflow_noguard$s" --guard=0 -- err_overflow
    expect_status "err_overflow --guard=0$s" 0
    check "err_overflow --guard=0$s" "$J" "errors == []"

    hl "err_realloc_freed$s" -- err_realloc_freed
    expect_status "err_realloc_freed$s" 0
    expect_stdout "err_realloc_freed$s" "err_realloc_freed survived"
    check "err_realloc_freed$s" "$J" "error_kinds() == ['realloc_freed']" \
        "errs('realloc_freed', 'realloc_after_free') == 1" "errs_alloc('realloc_freed', 'alloc_for_realloc') == 1"
}
heap_errors ""
# Every block with a header (live_header.c): the same errors found through the marks and the
# released blocks' history instead of the direct map.
export HEAPLENS_HEADER_MIN=0
heap_errors _headers
unset HEAPLENS_HEADER_MIN

# ================================================================================================
# Reachability (memcheck's definitions)
# ================================================================================================
hl reach_global -- reach_global
expect_status reach_global 0
check reach_global "$J" \
    "rec('reachable', 'make_global_block') == {'bytes': 123, 'blocks': 1, 'records': 1}" \
    "rec('reachable', 'make_chain_tail') == {'bytes': 77, 'blocks': 1, 'records': 1}" \
    "ln('reachable') == 3" "lb('reachable') == 240" \
    "rec('definite', 'leak_unreachable') == {'bytes': 99, 'blocks': 1, 'records': 1}" \
    "lb('definite') == 99" "lb('indirect') == 0" "lb('possible') == 0"

hl reach_sparse -- reach_sparse
expect_status reach_sparse 0
check reach_sparse "$J" \
    "rec('reachable', 'from_bss_start') == {'bytes': 40, 'blocks': 1, 'records': 1}" \
    "rec('reachable', 'from_bss_boundary') == {'bytes': 41, 'blocks': 1, 'records': 1}" \
    "rec('reachable', 'from_bss_end') == {'bytes': 42, 'blocks': 1, 'records': 1}" \
    "rec('reachable', 'from_mapping') == {'bytes': 43, 'blocks': 1, 'records': 1}" \
    "rec('reachable', 'from_big_block') == {'bytes': 67108864 + 45, 'blocks': 2, 'records': 2}" \
    "rec('reachable', 'held_by_big_block') == {'bytes': 45, 'blocks': 1, 'records': 1}" \
    "lb('definite') == 44" "ln('definite') == 1"
# The scan reads only pages that hold something: the 384 MiB (98,304 pages) never written cost
# the traced run no fault each. Minor faults of the whole run, native and traced.
minflt() {
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt)' "$@"
}
flt_native=$(minflt "$PROGS/reach_sparse")
flt_traced=$(minflt "$HL" run -q -o "$D/faults.hl" -- "$PROGS/reach_sparse")
if [ -n "$flt_native" ] && [ -n "$flt_traced" ] && [ $((flt_traced - flt_native)) -lt 20480 ]; then
    pass "reach_sparse: untouched pages not read by the scan ($flt_native faults native, $flt_traced traced)"
else
    fail "reach_sparse: untouched pages read by the scan" "$flt_native faults native, $flt_traced traced"
fi

# A program that exits holding 300,000 small blocks: the exit scan's verdicts, and its memory,
# a peak of the traced program's own. The scan keeps a block's start, size and verdict (17
# bytes), its marking stack and the verdicts written (26 bytes a block in all); it looks a
# block's record up again to write its verdict. It took 45 with copies of the records (a program starting others while it held
# 100,000 blocks had twice its native peak RSS). Measured as the agent alone, scan on and off.
hl scan_held -- scan_held
expect_status scan_held 0
check scan_held "$J" "lb('definite') == 32" "ln('definite') == 1" "lb('indirect') == 288" \
    "ln('indirect') == 9" "ln('reachable') == 300001" "lb('possible') == 0" \
    "lb('reachable') == 300000 * 8 + sum(16 + i % 65 for i in range(300000))"
maxrss() {
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
rss_scan=$(maxrss env LD_PRELOAD="$BUILD/libheaplens.so" HEAPLENS_OPTIONS="output=$D/held1.hl" "$PROGS/scan_held")
rss_none=$(maxrss env LD_PRELOAD="$BUILD/libheaplens.so" HEAPLENS_OPTIONS="output=$D/held0.hl:scan=0" "$PROGS/scan_held")
if [ -n "$rss_scan" ] && [ -n "$rss_none" ] && [ $(((rss_scan - rss_none) * 1024 / 300000)) -lt 30 ]; then
    pass "scan_held: the exit scan took $(((rss_scan - rss_none) * 1024 / 300000)) bytes a block ($rss_none KiB without it, $rss_scan KiB with it)"
else
    fail "scan_held: the exit scan's memory" "$rss_none KiB without it, ${rss_scan:-?} KiB with it (less than 30 bytes a block expected)"
fi

hl reach_list -- reach_list
expect_status reach_list 0
check reach_list "$J" "ln('definite') == 1" "lb('definite') == 32" "ln('indirect') == 9" "lb('indirect') == 288" \
    "rec('definite', 'build_lost_list')['bytes'] == 32" "rec('indirect', 'build_lost_list')['blocks'] == 9" \
    "lb('reachable') == 0"

hl reach_cycle -- reach_cycle
expect_status reach_cycle 0
check reach_cycle "$J" "ln('definite') == 1" "lb('definite') == 48" "ln('indirect') == 2" "lb('indirect') == 96" \
    "rec('definite', 'build_lost_cycle')['blocks'] == 1" "rec('indirect', 'build_lost_cycle')['blocks'] == 2"

hl reach_interior -- reach_interior
expect_status reach_interior 0
check reach_interior "$J" \
    "rec('possible', 'make_interior_only') == {'bytes': 64, 'blocks': 1, 'records': 1}" \
    "rec('reachable', 'make_start_pointer') == {'bytes': 32, 'blocks': 1, 'records': 1}" \
    "rec('reachable', 'make_newarray_like') == {'bytes': 72, 'blocks': 1, 'records': 1}" \
    "lb('possible') == 64" "lb('definite') == 0" "lb('indirect') == 0"

hl reach_tls -- reach_tls
expect_status reach_tls 0
# The worker's DTV, calloc'ed by glibc in pthread_create, is known only through a pointer to its
# second word: possibly lost, exactly as memcheck says. Every other possibly lost byte would be
# a mistake.
check reach_tls "$J" \
    "rec('reachable', 'store_in_main_tls') == {'bytes': 321, 'blocks': 1, 'records': 1}" \
    "rec('reachable', 'store_in_worker_tls') == {'bytes': 654, 'blocks': 1, 'records': 1}" \
    "lb('definite') == 0" "lb('possible') == rec('possible', 'allocate_dtv')['bytes']"

hl reach_thread_stack -- reach_thread_stack
expect_status reach_thread_stack 0
check reach_thread_stack "$J" \
    "rec('reachable', 'thread_stack_holder') == {'bytes': 555, 'blocks': 1, 'records': 1}" \
    "lb('definite') == 0" "lb('possible') == rec('possible', 'allocate_dtv')['bytes']"

# ================================================================================================
# Fortran
# ================================================================================================
hl fortran_alloc -- fortran_alloc
expect_status fortran_alloc 0
expect_stdout fortran_alloc "fortran_alloc done"
# libgfortran mallocs/callocs its unit tables at start-up: malloc >= 11 (10 in churn + 1 in
# keep_forever). It frees them in its own destructor, which may run before or after the agent's
# final scan (library destructor order), so free >= 10 (churn's deallocations).
check fortran_alloc "$J" \
    "calls['malloc'] >= 11" "calls['free'] >= 10" \
    "rec('reachable', 'keep_forever') == {'bytes': 4936, 'blocks': 1, 'records': 1}" \
    "names('churn') == []" "lb('definite') == 0" "errors == []"

# ================================================================================================
# The trace's window grows with the program: 1 MiB while it is small, 4 MiB past 256 MiB, each
# from a new frame, and the trace reads back whole (every allocation of the three phases); the
# exit scan's records come after the long window was given back, in a small frame of their own
# ================================================================================================
hl trace_window -- trace_window
expect_status trace_window 0
check trace_window "$J" "calls['malloc'] == 3 * 400000 + 2 + 3" "calls['free'] == 3 * 400000" \
    "rec('definite', 'leak_three') == {'bytes': 144, 'blocks': 3, 'records': 1}" \
    "rec('reachable', 'grow') == {'bytes': 416 * 1024 * 1024, 'blocks': 2, 'records': 2}" \
    "j['trace_complete'] is True"
# The small first frame (128 KiB), then 1 MiB while the program holds at most 96 MiB, then
# larger ones up to 4 MiB at 416 MiB, each from a new frame (which sizes come between depends on
# when chunks end, the writer's time: 1, 4 MiB here; 1, 2, 4 on a loaded machine), then the exit
# scan's small frame.
if W=$(python3 "$HERE/zstd_windows.py" "$T" grow 2>&1); then
    pass "trace_window: zstd windows $W"
else
    fail "trace_window: zstd windows" "$W"
fi
# No room for the 4 MiB window (the program fills its address space under ulimit -v and gives
# 1 MiB back before it touches its 320 MiB): the trace goes on in the window it had, says so.
D=$WORK/trace_window_tight
mkdir -p "$D"
(ulimit -v 1400000 && cd "$D" && timeout "$TIMEOUT" "$HL" run -q --json "$D/report.json" -o "$D/trace.hl" \
    -- "$PROGS/trace_window" tight >"$D/stdout" 2>"$D/stderr" </dev/null)
ST=$?
expect_status "trace_window tight" 0
check "trace_window tight" "$D/report.json" "calls['malloc'] == 3 * 400000 + 2 + 3" \
    "calls['free'] == 3 * 400000" "j['trace_complete'] is True" \
    "rec('definite', 'leak_three') == {'bytes': 144, 'blocks': 3, 'records': 1}"
if W=$(python3 "$HERE/zstd_windows.py" "$D/trace.hl" tight 2>&1); then
    pass "trace_window tight: the window stays as it was, in a new frame ($W)"
else
    fail "trace_window tight: zstd windows" "$W"
fi
# The window it stayed at: the last long one, before the exit scan's small frame.
read -r -a windows <<<"${W%%:*}"
last=${windows[${#windows[@]} - 2]:-0}
[[ $last =~ ^[0-9]+$ ]] || last=0
last_kib=$((last / 1024))
if grep -q "no memory for a larger trace window: it stays at $last_kib KiB" "$D/stderr" &&
    ! grep -q "compressing the trace failed" "$D/stderr"; then
    pass "trace_window tight: said in one line, tracing went on"
else
    fail "trace_window tight: stderr" "$(grep heaplens "$D/stderr" | head -3)"
fi

# ================================================================================================
# The program's own output is untouched
# ================================================================================================
N=$WORK/native
mkdir -p "$N"
(cd "$N" && timeout "$TIMEOUT" "$PROGS/output_heavy" >"$N/stdout" 2>"$N/stderr" </dev/null)
NST=$?
hl output_heavy -- output_heavy
expect_status output_heavy "$NST"
if cmp -s "$N/stdout" "$D/stdout"; then pass "output_heavy: stdout identical to native ($(wc -c <"$N/stdout") bytes)"; else fail "output_heavy: stdout" "differs from native: $(cmp "$N/stdout" "$D/stdout" 2>&1 | head -1)"; fi
grep -v '^==heaplens== ' "$D/stderr" >"$D/stderr.program"
if cmp -s "$N/stderr" "$D/stderr.program"; then pass "output_heavy: stderr identical to native plus the report"; else fail "output_heavy: stderr" "differs from native: $(cmp "$N/stderr" "$D/stderr.program" 2>&1 | head -1)"; fi
check output_heavy "$J" "calls['malloc'] >= 20000" "names('make_line') == []"
hl output_heavy_q -q -- output_heavy
expect_status "output_heavy -q" "$NST"
if cmp -s "$N/stdout" "$D/stdout"; then pass "output_heavy -q: stdout identical"; else fail "output_heavy -q: stdout" "$(cmp "$N/stdout" "$D/stdout" 2>&1 | head -1)"; fi
if cmp -s "$N/stderr" "$D/stderr"; then pass "output_heavy -q: stderr identical"; else fail "output_heavy -q: stderr" "$(cmp "$N/stderr" "$D/stderr" 2>&1 | head -1)"; fi

# ================================================================================================
# Options
# ================================================================================================
hl quiet -q -- alloc_basic
expect_status "-q" 0
if [ ! -s "$D/stderr" ]; then pass "-q: nothing on stderr"; else fail "-q: stderr" "$(wc -l <"$D/stderr") line(s): $(head -1 "$D/stderr")"; fi
check "-q" "$J" "lb('definite') == 1078"

hl errexit_leak --error-exitcode=42 -- alloc_basic
expect_status "--error-exitcode=42 (definite leak)" 42
hl errexit_indirect --error-exitcode=42 -- reach_list
expect_status "--error-exitcode=42 (lost list)" 42
hl errexit_error --error-exitcode=42 -- err_mismatch
expect_status "--error-exitcode=42 (heap error, no leak)" 42
hl errexit_clean --error-exitcode=42 -- cxx_containers
expect_status "--error-exitcode=42 (nothing lost)" 0
hl errexit_possible --error-exitcode=42 -- reach_interior
expect_status "--error-exitcode=42 (possibly lost and reachable only)" 0
hl errexit_own --error-exitcode=42 -- exit_underscore
expect_status "--error-exitcode=42 (leak, program exits 5)" 42

SUPP=$WORK/supp.txt
printf '# heaplens integration test\nleak:leak_before_ret*\n' >"$SUPP"
hl suppress --suppressions="$SUPP" --error-exitcode=42 -- exit_return
expect_status "--suppressions (all leaks suppressed)" 3
check "--suppressions" "$J" "lb('definite') == 0" "names('leak_before_return') == []"
printf 'leak:no_such_function_anywhere\n' >"$WORK/supp2.txt"
hl suppress_other --suppressions="$WORK/supp2.txt" --error-exitcode=42 -- exit_return
expect_status "--suppressions (unrelated pattern)" 42

hl kinds_definite --show-leak-kinds=definite -- reach_global
expect_status "--show-leak-kinds=definite" 0
if grep -q leak_unreachable "$D/stderr" && ! grep -q make_global_block "$D/stderr"; then
    pass "--show-leak-kinds=definite: only the definite record printed"
else
    fail "--show-leak-kinds=definite" "leak_unreachable printed: $(grep -c leak_unreachable "$D/stderr"), make_global_block printed: $(grep -c make_global_block "$D/stderr")"
fi
hl kinds_all --show-leak-kinds=all -- reach_global
if grep -q leak_unreachable "$D/stderr" && grep -q make_global_block "$D/stderr" && grep -q make_chain_tail "$D/stderr"; then
    pass "--show-leak-kinds=all: reachable records printed"
else
    fail "--show-leak-kinds=all" "make_global_block printed: $(grep -c make_global_block "$D/stderr")"
fi

# ================================================================================================
# Bad input: one "heaplens:" line, a non-zero status, no crash
# ================================================================================================
bad_input "run: missing program" "$HL" run -- "$WORK/no-such-program"
printf 'this is a text file, not a program\n' >"$WORK/not-elf"
chmod +x "$WORK/not-elf"
bad_input "run: executable text file" "$HL" run -- "$WORK/not-elf"
# (a statically linked program is not bad input: it runs untraced, see foreign.sh)
bad_input "run: unwritable trace path" "$HL" run -o /nonexistent/dir/x.hl -- "$PROGS/alloc_basic"
SIZE=$(stat -c %s "$BASIC_TRACE" 2>/dev/null || echo 0)
head -c $((SIZE / 2)) "$BASIC_TRACE" >"$WORK/half.hl"
bad_input "report: truncated trace ($((SIZE / 2)) of $SIZE bytes)" "$HL" report "$WORK/half.hl"
# A trace cut inside a later chunk: the chunks before it still make a report, and even the
# views alone (no usual report on stderr) say in one line that it is cut short.
D=$WORK/cut_views
mkdir -p "$D"
"$HL" run -q -o "$D/t.hl" -- "$PROGS/churn_random" >/dev/null 2>&1
# cut halfway into a chunk in the middle (the writer ends a chunk every 8 ms, so the last one
# may hold only the end, after every allocation)
python3 -c '
import struct, sys
d = open(sys.argv[1], "rb").read()
off, chunks = 16, []
while off + 16 <= len(d):
    stored = struct.unpack_from("<I", d, off + 4)[0]
    chunks.append((stored, off))
    off += 16 + stored
stored, at = chunks[len(chunks) // 2] if len(chunks) > 2 else chunks[-1]
open(sys.argv[2], "wb").write(d[:at + 16 + stored // 2])' "$D/t.hl" "$D/cut.hl"
(timeout -k 5 "$TIMEOUT" "$HL" report --summary "$D/cut.hl" >"$D/stdout" 2>"$D/stderr")
st=$?
alloc=$(sed -n 's/^  allocations: \([0-9,]*\).*/\1/p' "$D/stdout" | tr -d ,)
if [ "$st" = 0 ] && [ "${alloc:-0}" -gt 0 ] && [ "${alloc:-0}" -lt 200000 ] &&
    [ "$(wc -l <"$D/stderr")" = 1 ] && grep -q "^heaplens: .*cut short" "$D/stderr"; then
    pass "report --summary of a trace cut in a later chunk: ${alloc} allocations, one line"
else
    fail "report --summary of a trace cut in a later chunk" "status $st, allocations '${alloc}', stderr: $(head -c 300 "$D/stderr")"
fi
printf 'GARBAGE\0\1\2\3 this is not a heaplens trace at all %.0s' 1 2 3 4 5 6 7 8 >"$WORK/garbage.hl"
bad_input "report: garbage file" "$HL" report "$WORK/garbage.hl"
: >"$WORK/empty.hl"
bad_input "report: empty file" "$HL" report "$WORK/empty.hl"
bad_input "report: missing file" "$HL" report "$WORK/no-such-trace.hl"

if [ "$FAILED" -eq 0 ]; then
    rm -rf "$WORK"
else
    echo "# outputs of every case kept in $WORK"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
