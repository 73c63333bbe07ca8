#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# harm.sh BUILD_DIR - the traced program is never harmed: it runs under heaplens as it runs
# natively, compared in the same test. main() ending with pthread_exit (the process must still
# end, with its exit handlers and a complete trace), a small `ulimit -f` (the agent's writes
# fail, the program never gets their SIGXFSZ), a program that puts its own data file on
# descriptor 2 (the agent never writes there), and children made by clone() and vfork() (each
# in the right trace, under the right thread, the parent's trace untouched), SIGKILL at random
# moments (what is lost, measured), a fatal signal while the program forks, the agent's stack
# use per allocator call, and a dlopen by a bare name found through the program's own RUNPATH. One line per
# check, "PASS name" or "FAIL name: reason" ("SKIP name: why" when the machine cannot run it);
# the last line is "N passed, N failed"; exit 1 when anything failed.
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
LIB=$BUILD/libheaplens.so
PROGS=$BUILD/programs
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK=$HERE/check.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-harm.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=30 # seconds per command; every case takes about one normally
ulimit -c 0 2>/dev/null # the case killed by SIGXFSZ must not leave a core file

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }

# check CASE JSON EXPR... : assertions on a JSON report, one line each (see check.py).
check() {
    local out
    out=$(python3 "$CHECK" "$@" 2>&1)
    [ -n "$out" ] && echo "$out"
    PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
    FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
}

# same_run CASE NATIVE_DIR HL_DIR: the program's stdout and exit status under heaplens are the
# native run's (each directory holds stdout and status).
same_run() {
    local n h
    n=$(cat "$2/status" 2>/dev/null)
    h=$(cat "$3/status" 2>/dev/null)
    if [ -n "$n" ] && [ "$n" = "$h" ]; then
        pass "$1: exit status $h, as natively"
    else
        fail "$1: exit status" "natively ${n:-none}, under heaplens ${h:-none}$( [ "$h" = 124 ] && echo ' (timed out)')"
    fi
    if cmp -s "$2/stdout" "$3/stdout"; then
        pass "$1: stdout as natively"
    else
        fail "$1: stdout" "natively '$(head -c 200 "$2/stdout" | tr '\n' '|')', under heaplens '$(head -c 200 "$3/stdout" | tr '\n' '|')'"
    fi
}

# run DIR CMD... : runs CMD in DIR (made fresh) with a timeout; DIR/stdout, DIR/stderr, DIR/status.
# The outer redirection keeps bash's own "File size limit exceeded" notices off the output.
run() {
    local dir=$1
    shift
    mkdir -p "$dir"
    { (cd "$dir" && exec timeout -k 5 "$TIMEOUT" "$@" >"$dir/stdout" 2>"$dir/stderr" </dev/null); } 2>/dev/null
    echo $? >"$dir/status"
}

# report CASE TRACE JSON [options]: `heaplens report --json JSON TRACE`, outside any limit.
report() {
    local name=$1 trace=$2 json=$3
    shift 3
    if timeout -k 5 "$TIMEOUT" "$HL" report -q --json "$json" "$@" "$trace" >/dev/null 2>"$json.stderr" </dev/null &&
        [ -s "$json" ]; then
        return 0
    fi
    fail "$name: report" "heaplens report failed on $trace: $(head -c 200 "$json.stderr")"
    return 1
}

# first_child JSON: the trace of the first child a `heaplens run --json` report lists (the
# report writes each top-level key on a line of its own).
first_child() {
    sed -n 's/^  "children": \[{"pid": [0-9]*, "trace": "\([^"]*\)".*/\1/p' "$1"
}

need() { # need PROG...: fails setup when a program is missing
    local p ok=0
    for p in "$@"; do
        [ -x "$PROGS/$p" ] || { fail "setup" "$PROGS/$p missing (make $PROGS/$p)"; ok=1; }
    done
    return $ok
}

[ -x "$HL" ] && [ -f "$LIB" ] || { fail setup "$HL or $LIB missing (make all)"; finish; }
need harm_pthread_exit harm_fsize harm_stderr harm_clone || finish

# ================================================================================================
# main() ends with pthread_exit: natively the process exits 0 when its last thread has gone
# (glibc calls exit(0) there, so atexit handlers and destructors run). Under heaplens the agent's
# writer thread must not keep it alive: alone, with a thread that outlives main and allocates,
# and with one that never allocates.
# ================================================================================================
for mode in alone worker quiet; do
    name="pthread_exit $mode"
    D=$WORK/pthread_exit_$mode
    run "$D/native" "$PROGS/harm_pthread_exit" "$mode"
    run "$D/hl" "$HL" run -q -o "$D/t.hl" -- "$PROGS/harm_pthread_exit" "$mode"
    same_run "$name" "$D/native" "$D/hl"
    grep -qx "atexit ran" "$D/hl/stdout" && grep -qx "destructor ran" "$D/hl/stdout" &&
        pass "$name: atexit handler and destructor ran" ||
        fail "$name: exit handlers" "stdout: $(head -c 200 "$D/hl/stdout" | tr '\n' '|')"
    report "$name" "$D/t.hl" "$D/r.json" || continue
    # The global `kept` holds 300 bytes (reachable); the worker loses 200 (worker_leak).
    exprs=("j['trace_complete'] == True" "scanned == True" "end['how'] == 'exit'" "end['value'] == 0"
        "rec('reachable', 'keep_global') == {'bytes': 300, 'blocks': 1, 'records': 1}")
    if [ "$mode" = worker ]; then
        exprs+=("rec('definite', 'worker_leak') == {'bytes': 200, 'blocks': 1, 'records': 1}" "totals['threads'] == 2")
    fi
    check "$name" "$D/r.json" "${exprs[@]}"
done

# ================================================================================================
# A small `ulimit -f`: the trace outgrows it and the agent's writes fail with EFBIG. Natively
# nothing of the program's passes the limit but what it writes itself; under heaplens its exit
# status, its output and its own SIGXFSZ (counted by its handler, left pending while it blocks
# it, or killing it) stay exactly as natively. The first chunk of the trace (under 1 KiB) fits in
# the limit; the next, which dlclose makes the agent write from the program's own thread, does
# not. The trace then says it was cut, and one line says why.
# ================================================================================================
FSIZE_KIB=8
for mode in quiet own blocked die; do
    name="ulimit -f $FSIZE_KIB, $mode"
    D=$WORK/fsize_$mode
    (ulimit -f $FSIZE_KIB && run "$D/native" "$PROGS/harm_fsize" "$mode" "$D/native/own.data")
    (ulimit -f $FSIZE_KIB && run "$D/hl" "$HL" run -q -o "$D/t.hl" -- "$PROGS/harm_fsize" "$mode" "$D/hl/own.data")
    same_run "$name" "$D/native" "$D/hl"
    [ "$mode" = die ] && continue # killed by its own write, perhaps before a trace write failed
    n=$(grep -c "file size limit reached" "$D/hl/stderr")
    [ "$n" = 1 ] && pass "$name: one line says the file size limit was reached" ||
        fail "$name: message" "$n lines: $(head -c 300 "$D/hl/stderr" | tr '\n' '|')"
    report "$name" "$D/t.hl" "$D/r.json" && check "$name" "$D/r.json" "j['trace_complete'] == False"
done
# The issue's own case: sqlite3 (a real program, when installed).
if command -v sqlite3 >/dev/null; then
    D=$WORK/fsize_sqlite3
    (ulimit -f 2 && run "$D/native" sqlite3 :memory: 'select 1')
    (ulimit -f 2 && run "$D/hl" "$HL" run -q -o "$D/t.hl" -- sqlite3 :memory: 'select 1')
    same_run "ulimit -f 2, sqlite3" "$D/native" "$D/hl"
else
    skip "ulimit -f 2, sqlite3" "sqlite3 not installed"
fi

# ================================================================================================
# The program's descriptor 2 is its own: it closes it and opens its data file there, then the
# agent has something to say (the trace outgrows a file size limit, or fills a small disk). The
# data file must hold only the program's bytes; the message goes to the stderr the program
# started with, or nowhere.
# ================================================================================================
DATA_EXPECTED=$'data line 1\ndata line 2'
data_is_programs() { # CASE FILE
    if [ "$(cat "$2" 2>/dev/null)" = "$DATA_EXPECTED" ]; then
        pass "$1: the data file on descriptor 2 holds only the program's bytes"
    else
        fail "$1: data file" "$(head -c 300 "$2" 2>/dev/null | tr '\n' '|')"
    fi
}
STDERR_KIB=16
for mode in plain reuse; do
    name="fd 2 reopened ($mode), ulimit -f $STDERR_KIB"
    D=$WORK/stderr_$mode
    (ulimit -f $STDERR_KIB && run "$D" "$HL" run -q -o "$D/t.hl" -- "$PROGS/harm_stderr" "$mode" "$D/data")
    [ "$(cat "$D/status")" = 0 ] && grep -qx "harm_stderr done" "$D/stdout" &&
        pass "$name: the program ran to its end" ||
        fail "$name: the program ran to its end" "status $(cat "$D/status"): $(head -c 200 "$D/stdout")"
    data_is_programs "$name" "$D/data"
    if [ "$mode" = plain ]; then
        # The agent's duplicate of the original stderr is intact: the message arrives there.
        grep -q "^heaplens: .*file size limit reached" "$D/stderr" &&
            pass "$name: the agent's message went to the original stderr" ||
            fail "$name: message" "not on the original stderr: $(head -c 300 "$D/stderr" | tr '\n' '|')"
    fi
done

# No descriptor 2 at start: the agent writes no message at all (here without the CLI, which
# needs a stderr of its own).
name="fd 2 closed at start"
D=$WORK/stderr_closed
mkdir -p "$D"
(ulimit -f $STDERR_KIB && cd "$D" && HEAPLENS_OUTPUT="$D/t.hl" LD_PRELOAD="$LIB" \
    timeout -k 5 "$TIMEOUT" "$PROGS/harm_stderr" plain "$D/data" >"$D/stdout" 2>&- </dev/null)
st=$?
[ "$st" = 0 ] && pass "$name: exit status 0" || fail "$name: exit status" "got $st"
data_is_programs "$name" "$D/data"

# A full disk (a 64 KiB tmpfs in a private mount namespace) rather than a file size limit.
name="fd 2 reopened, disk full"
D=$WORK/stderr_disk_full
mkdir -p "$D/disk"
if unshare -rm true 2>/dev/null; then
    unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs "$1/disk" && cd "$1" &&
        timeout -k 5 "$2" "$3" run -q -o "$1/disk/t.hl" -- "$4" plain "$1/data" >"$1/stdout" 2>"$1/stderr" </dev/null
        echo $? >"$1/status"' sh "$D" "$TIMEOUT" "$HL" "$PROGS/harm_stderr"
    [ "$(cat "$D/status" 2>/dev/null)" = 0 ] && pass "$name: exit status 0" ||
        fail "$name: exit status" "got $(cat "$D/status" 2>/dev/null)"
    data_is_programs "$name" "$D/data"
    grep -q "^heaplens: .*disk full" "$D/stderr" &&
        pass "$name: the agent's message went to the original stderr" ||
        fail "$name: message" "not on the original stderr: $(head -c 300 "$D/stderr" | tr '\n' '|')"
else
    skip "$name" "no private mount namespace here (unshare -rm)"
fi

# ================================================================================================
# clone() and vfork(). Without CLONE_VM a child is a process of its own, traced as a fork child
# is; with CLONE_VM it is a thread of the parent's trace, never counted as the parent. A vfork
# child shares the parent's memory until it execs or exits: neither may end or cut the parent's
# trace. posix_spawn (glibc's clone inside) must work as before; the spawned image has its own
# trace.
# ================================================================================================
for mode in fork vm thread vfork spawn; do
    name="clone $mode"
    D=$WORK/clone_$mode
    run "$D/native" "$PROGS/harm_clone" "$mode"
    run "$D/hl" "$HL" run -q --json "$D/r.json" -o "$D/t.%p.hl" -- "$PROGS/harm_clone" "$mode"
    same_run "$name" "$D/native" "$D/hl"
    [ -s "$D/r.json" ] || { fail "$name: report" "no JSON report"; continue; }
    # The parent: its own 333-byte block, whatever the child did; a complete trace.
    parent=("j['trace_complete'] == True" "end['how'] == 'exit'" "end['value'] == 0")
    case $mode in
    fork)
        check "$name (parent)" "$D/r.json" "${parent[@]}" "calls['malloc'] == 1" \
            "names('child_leak') == []" "len(children) == 1"
        child=$(first_child "$D/r.json")
        if [ -n "$child" ] && report "$name" "$child" "$D/child.json"; then
            check "$name (child)" "$D/child.json" "process['fork_child'] == True" \
                "end['how'] == 'exit'" "end['value'] == 7" "calls['malloc'] == 4" \
                "rec('definite', 'child_leak') == {'bytes': 222, 'blocks': 1, 'records': 1}"
        else
            fail "$name (child)" "no trace of the child"
        fi
        ;;
    vm | thread)
        size=444
        [ $mode = thread ] && size=555
        check "$name" "$D/r.json" "${parent[@]}" "calls['malloc'] == 5" "totals['threads'] == 2" \
            "rec('reachable', 'child_work') == {'bytes': $size, 'blocks': 1, 'records': 1}"
        # The child's four blocks are under a thread of their own, not the parent's.
        trace=$(sed -n 's/^  "trace": "\(.*\)",\{0,1\}$/\1/p' "$D/r.json")
        report "$name" "$trace" "$D/threads.json" --threads &&
            check "$name" "$D/threads.json" \
                "[(t['allocations'], t['bytes']) for t in j['threads'] if t['tid'] != process['pid']] == [(4, 4 * $size)]" \
                "[(t['allocations'], t['bytes']) for t in j['threads'] if t['tid'] == process['pid']] == [(1, 333)]"
        ;;
    vfork)
        # The vfork child's _exit(5) did not end the parent's trace (its later 333 is there);
        # the exec of the clone(CLONE_VFORK) child wrote no EXEC into it, but a trace of its own.
        check "$name" "$D/r.json" "${parent[@]}" "calls['malloc'] == 1" "len(children) == 1"
        ;;
    spawn)
        check "$name" "$D/r.json" "${parent[@]}" "calls['malloc'] == 1" "len(children) == 1"
        ;;
    esac
    if [ $mode = vfork ] || [ $mode = spawn ]; then
        child=$(first_child "$D/r.json")
        if [ -n "$child" ] && report "$name" "$child" "$D/child.json"; then
            check "$name (exec'd image)" "$D/child.json" "process['argv'][1:] == ['exec-target']" \
                "calls['malloc'] == 1" "totals['bytes_allocated'] == 666" "j['trace_complete'] == True"
        else
            fail "$name (exec'd image)" "no trace of it"
        fi
    fi
done

# ================================================================================================
# SIGKILL at random moments: nothing can run in the process, so what the trace lacks is what the
# writer had not yet flushed (a chunk ends at most every 8 ms). kill_progress publishes how many
# mallocs it made in a shared file; the trace must stay readable, say its end is missing, and
# lack at most the last 100 ms of events (median under 25 ms: the writer flushes every 8 ms).
KILL_TRIALS=10
KILL_MAX_LOST_MS=100
KILL_MEDIAN_LOST_MS=25
if [ -x "$PROGS/kill_progress" ]; then
    lost_list=""
    for trial in $(seq 1 $KILL_TRIALS); do
        D=$WORK/sigkill_$trial
        mkdir -p "$D"
        timeout -k 5 "$TIMEOUT" "$HL" run -q -o "$D/t.hl" -- "$PROGS/kill_progress" "$D/progress" \
            >/dev/null 2>"$D/stderr" </dev/null &
        cli=$!
        pid=""
        for _ in $(seq 1 500); do # the program has started once it published its pid
            pid=$(python3 -c 'import struct,sys; print(struct.unpack_from("<4Q", open(sys.argv[1],"rb").read(32))[3])' "$D/progress" 2>/dev/null)
            [ -n "$pid" ] && [ "$pid" != 0 ] && break
            sleep 0.01
        done
        sleep "0.$(printf '%03d' $((100 + RANDOM % 500)))"
        kill -KILL "$pid" 2>/dev/null
        wait $cli 2>/dev/null
        if ! timeout -k 5 "$TIMEOUT" "$HL" report -q --json "$D/r.json" "$D/t.hl" >/dev/null 2>"$D/report.err"; then
            fail "SIGKILL trial $trial: report" "$(head -c 200 "$D/report.err")"
            continue
        fi
        res=$(python3 - "$D/progress" "$D/r.json" <<'PYEOF'
import json, struct, sys
mallocs, start, last, pid = struct.unpack_from("<4Q", open(sys.argv[1], "rb").read(32))
j = json.load(open(sys.argv[2]))
traced = j["calls"]["malloc"]
lost = max(0, mallocs - traced)
per_ms = mallocs / max(1, (last - start) / 1e6)
print("%s %.2f %d %d" % (j["trace_complete"], lost / per_ms, mallocs, traced))
PYEOF
)
        read -r complete lost_ms made traced <<<"$res"
        if [ "$complete" != False ]; then
            fail "SIGKILL trial $trial" "trace_complete is '$complete' for a killed process"
        elif awk -v l="$lost_ms" -v m=$KILL_MAX_LOST_MS 'BEGIN { exit !(l <= m) }'; then
            pass "SIGKILL trial $trial: $traced of $made mallocs in the trace, $lost_ms ms lost"
        else
            fail "SIGKILL trial $trial" "$traced of $made mallocs in the trace: $lost_ms ms lost (at most $KILL_MAX_LOST_MS)"
        fi
        lost_list="$lost_list $lost_ms"
    done
    median=$(tr ' ' '\n' <<<"$lost_list" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
    maxl=$(tr ' ' '\n' <<<"$lost_list" | grep . | sort -g | tail -1)
    if [ -n "$median" ] && awk -v l="$median" -v m=$KILL_MEDIAN_LOST_MS 'BEGIN { exit !(l <= m) }'; then
        pass "SIGKILL at random moments: median $median ms, max $maxl ms of events lost ($KILL_TRIALS trials)"
    else
        fail "SIGKILL at random moments" "median ${median:-?} ms, max ${maxl:-?} ms lost (median at most $KILL_MEDIAN_LOST_MS)"
    fi
else
    skip "SIGKILL at random moments" "$PROGS/kill_progress missing"
fi

# ================================================================================================
# A fatal signal while the program forks: the agent's prepare handler takes its locks before the
# fork and its parent handler gives them back after it, and a signal in between came to a
# handler that waited for them forever (12 of 40 such runs hung). Each run must end by SIGALRM,
# as natively, and its trace with it.
# ================================================================================================
FORK_SIGNAL_TRIALS=20
if [ -x "$PROGS/harm_fork_signal" ]; then
    run "$WORK/fsig_native" "$PROGS/harm_fork_signal" 20000
    native_status=$(cat "$WORK/fsig_native/status")
    bad=""
    ended=0
    for i in $(seq $FORK_SIGNAL_TRIALS); do
        d=$WORK/fsig_$i
        TIMEOUT=10 run "$d" "$HL" run -q --no-follow -o "$d/t.hl" -- "$PROGS/harm_fork_signal" $((20000 + i * 1370))
        st=$(cat "$d/status")
        [ "$st" = "$native_status" ] || bad="$bad run $i: status $st$( [ "$st" = 124 ] && echo ' (hung)');"
        if "$HL" report -q --json "$d/r.json" "$d/t.hl" >/dev/null 2>&1 &&
            python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); e = d["end"]; sys.exit(0 if e.get("how") == "signal" and e.get("value") == 14 else 1)' "$d/r.json" 2>/dev/null; then
            ended=$((ended + 1))
        fi
    done
    if [ -z "$bad" ] && [ "$native_status" = 142 ]; then
        pass "fatal signal while forking: $FORK_SIGNAL_TRIALS runs each ended by SIGALRM, as natively (status $native_status)"
    else
        fail "fatal signal while forking" "natively status $native_status;$bad"
    fi
    if [ "$ended" = "$FORK_SIGNAL_TRIALS" ]; then
        pass "fatal signal while forking: every trace says the program ended by signal 14"
    else
        fail "fatal signal while forking: trace end" "$ended of $FORK_SIGNAL_TRIALS traces say signal 14"
    fi
else
    skip "fatal signal while forking" "$PROGS/harm_fork_signal missing"
fi

# ================================================================================================
# Stack depth: the agent's hooks run on the program's stack, so each allocator call near the
# stack's limit costs the program what the agent uses beyond the allocator's own. stack_use
# paints the stack, calls each function and finds the lowest byte changed: the largest use
# under heaplens may exceed the native one by at most STACK_EXTRA_MAX bytes (a new stack's walk
# and a new return address's CFI rule included; a recursion repeating its addresses uses less).
STACK_EXTRA_MAX=2048
if [ -x "$PROGS/stack_use" ]; then
    run "$WORK/stack_native" "$PROGS/stack_use"
    run "$WORK/stack_hl" "$HL" run -q -o "$WORK/stack_hl/t.hl" -- "$PROGS/stack_use"
    n=$(awk '$1 == "max" { print $2 }' "$WORK/stack_native/stdout")
    h=$(awk '$1 == "max" { print $2 }' "$WORK/stack_hl/stdout")
    if [ -n "$n" ] && [ -n "$h" ] && [ $((h - n)) -le $STACK_EXTRA_MAX ]; then
        pass "stack use per allocator call: $h bytes under heaplens, $n natively (agent +$((h - n)))"
    else
        fail "stack use per allocator call" "${h:-?} bytes under heaplens, ${n:-?} natively (at most +$STACK_EXTRA_MAX)"
    fi
else
    skip "stack use per allocator call" "$PROGS/stack_use missing"
fi

# ================================================================================================
# dlopen by a bare name that only the program's RUNPATH ($ORIGIN/plugins) finds: the loader looks
# in the calling object's run path, and the agent's hook must not make itself that caller
# ================================================================================================
mkdir -p "$WORK/rp/plugins" && cp "$PROGS/libplugin.so" "$WORK/rp/plugins/"
cat >"$WORK/rp/main.c" <<'EOF'
#include <dlfcn.h>
#include <unistd.h>
int main(void) {
    void* h = dlopen("libplugin.so", RTLD_NOW);
    int (*roundtrip)(void) = h ? (int (*)(void))dlsym(h, "plugin_roundtrip") : 0;
    int (*missing)(void) = dlopen("libnot-there.so", RTLD_NOW) ? main : 0;
    return roundtrip && roundtrip() == 10 && !missing && write(1, "plugin found\n", 13) == 13 ? 0 : 1;
}
EOF
if ${CC:-cc} -O2 -g -o "$WORK/rp/main" "$WORK/rp/main.c" -Wl,-rpath,'$ORIGIN/plugins' -ldl 2>"$WORK/rp.cc.err"; then
    run "$WORK/rp_native" "$WORK/rp/main"
    run "$WORK/rp_hl" "$HL" run -q -o "$WORK/rp_hl/t.hl" -- "$WORK/rp/main"
    same_run "dlopen through the program's RUNPATH" "$WORK/rp_native" "$WORK/rp_hl"
else
    fail "dlopen through RUNPATH" "cannot build the program: $(head -2 "$WORK/rp.cc.err")"
fi
finish
