#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# attach.sh BUILD_DIR - heaplens attach / detach on running processes started without heaplens:
# what was allocated after the attach and the leaks among it, by stack; blocks made before the
# attach (released silently, and holding pointers the scan follows); the shell on an attached
# process; 20 attach/detach cycles in a row, also with 8 threads allocating; the process's
# output, exit status, threads and descriptors as without heaplens afterwards; one-line
# refusals (a pid that is gone, a process traced already, a static binary, another tracer, no
# thread waiting in a system call).
# One line per check, "PASS name" or "FAIL name: reason"; the last line is "N passed, N failed".
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
PROGS=$BUILD/programs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-attach.XXXXXX")
chmod 700 "$WORK"
KIDS=()
cleanup() {
    local p
    for p in "${KIDS[@]}"; do pkill -KILL -P "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK" || exit 1 # traces of an attach that should have been refused land here
PASSED=0
FAILED=0
pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }
ok() { # ok NAME WHY COMMAND...
    local name=$1 why=$2
    shift 2
    if "$@"; then pass "$name"; else fail "$name" "$why"; fi
}
[ -x "$HL" ] && [ -x "$PROGS/live_server" ] || { fail setup "build $HL and the test programs first"; finish; }
if [ "$(uname -m)" != x86_64 ]; then
    echo "SKIP attach: implemented for x86-64 only"
    finish
fi

# server NAME [THREADS]: live_server, not traced, in $WORK/NAME; sets PID
server() {
    local d=$WORK/$1
    mkdir -p "$d"
    ("$PROGS/live_server" "$d" "${2:-0}" >"$d/out" 2>"$d/err"; echo $? >"$d/status") &
    KIDS+=($!)
    PID=""
    for _ in $(seq 1 250); do [ -s "$d/pid" ] && PID=$(cat "$d/pid") && return 0; sleep 0.02; done
    return 1
}
stop() {
    touch "$WORK/$1/stop"
    for _ in $(seq 1 500); do [ -s "$WORK/$1/status" ] && return 0; sleep 0.02; done
    return 1
}
ended_as_alone() { # NAME: exit status 7 and its one line of output
    [ "$(cat "$WORK/$1/status" 2>/dev/null)" = 7 ] && [ "$(cat "$WORK/$1/out")" = "served 1" ] &&
        [ ! -s "$WORK/$1/err" ]
}
fds() { ls "/proc/$1/fd" 2>/dev/null | sort -n | tr '\n' ' '; }

# ---------------------------------------------------------------------------------------------
# One attach for 2 s; the server switches to leak_late (and releases blocks made before the
# attach) once it is attached
# ---------------------------------------------------------------------------------------------
server one || { fail "one: start" "no pid"; finish; }
fds_before=$(fds "$PID")
threads_before=$(grep Threads "/proc/$PID/status")
(cd "$WORK/one" && "$HL" attach --duration 2 --json "$WORK/one/r.json" "$PID" >"$WORK/one/attach.out" 2>"$WORK/one/attach.err"; echo $? >"$WORK/one/attach.status") &
KIDS+=($!)
for _ in $(seq 1 150); do grep -q "attached to process" "$WORK/one/attach.err" 2>/dev/null && break; sleep 0.02; done
touch "$WORK/one/late"
for _ in $(seq 1 400); do [ -s "$WORK/one/attach.status" ] && break; sleep 0.02; done
ok "attach --duration 2: status 0" "status $(cat "$WORK/one/attach.status" 2>/dev/null); $(head -c 400 "$WORK/one/attach.err")" \
    [ "$(cat "$WORK/one/attach.status" 2>/dev/null)" = 0 ]
ok "attach: says where the trace goes" "$(head -2 "$WORK/one/attach.err")" \
    grep -q "^heaplens: attached to process $PID; trace: $WORK/one/heaplens.live_server.$PID.hl" "$WORK/one/attach.err"
ok "attach: detached at the end, said" "$(grep detached "$WORK/one/attach.err")" \
    grep -q "^heaplens: detached from process $PID" "$WORK/one/attach.err"
ok "attach: the report says the heap at detach" "" grep -q "in use at detach:" "$WORK/one/attach.err"
ok "attach: leak_late's blocks definitely lost, by stack" "$(grep -A1 'definitely lost in' "$WORK/one/attach.err")" \
    bash -c "grep -A1 'are definitely lost in loss record' '$WORK/one/attach.err' | grep -q 'leak_late (tests/programs/live_server.c'"
ok "attach: blocks made before the attach and released after: no error" "$(grep 'ERROR SUMMARY' "$WORK/one/attach.err")" \
    grep -q "ERROR SUMMARY: 0 errors" "$WORK/one/attach.err"
ok "attach: the JSON says the trace ended by detach, complete, scanned" "" python3 -c "
import json,sys
j=json.load(open('$WORK/one/r.json'))
sys.exit(0 if j['end']['how']=='detach' and j['trace_complete'] and j['scanned'] else 1)"
ok "attach: a block held only by a block older than the attach is still reachable, not lost" "" python3 -c "
import json,sys
j=json.load(open('$WORK/one/r.json'))
lost=[r for r in j['leak_records'] if r['kind'] in ('definite','indirect','possible') and r['bytes'] % 77 == 0 and r['blocks']==1]
sys.exit(1 if lost else 0)"
sleep 0.2
ok "after detach: the same descriptors" "before: $fds_before; after: $(fds "$PID")" [ "$fds_before" = "$(fds "$PID")" ]
ok "after detach: the same threads" "$threads_before / $(grep Threads "/proc/$PID/status")" \
    [ "$threads_before" = "$(grep Threads "/proc/$PID/status")" ]
ok "after detach: no control socket left" "" bash -c "! ls \${TMPDIR:-/tmp}/heaplens-$(id -u)/ctl.$PID 2>/dev/null"
ok "one: the server ends as it would alone" "" stop one
ok "one: exit status 7, its output, nothing on stderr" "status $(cat "$WORK/one/status"); $(cat "$WORK/one/out") $(cat "$WORK/one/err")" ended_as_alone one

# ---------------------------------------------------------------------------------------------
# Attached without --duration: the shell talks to it, heaplens detach ends it
# ---------------------------------------------------------------------------------------------
server shell || fail "shell: start" "no pid"
(cd "$WORK/shell" && "$HL" attach "$PID" >"$WORK/shell/attach.out" 2>"$WORK/shell/attach.err")
st=$?
ok "attach without --duration returns at once, status 0" "status $st; $(cat "$WORK/shell/attach.err")" \
    bash -c "[ $st = 0 ] && grep -q 'heaplens detach $PID' '$WORK/shell/attach.err'"
printf 'leaks\nstatus\n' | timeout 60 "$HL" shell "$PID" >"$WORK/shell/sh.out" 2>"$WORK/shell/sh.err"
ok "shell on an attached process: a live scan" "$(head -c 400 "$WORK/shell/sh.out") $(cat "$WORK/shell/sh.err")" \
    grep -q "LEAK SUMMARY" "$WORK/shell/sh.out"
"$HL" attach "$PID" >"$WORK/shell/again.out" 2>"$WORK/shell/again.err"
st=$?
ok "attach twice: refused in one line, status 1" "status $st; $(cat "$WORK/shell/again.err")" \
    bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/shell/again.err') = 1 ] && grep -q 'traced already' '$WORK/shell/again.err'"
"$HL" detach "$PID" >"$WORK/shell/detach.out" 2>"$WORK/shell/detach.err"
st=$?
ok "detach: status 0, the report" "status $st; $(head -c 300 "$WORK/shell/detach.err")" \
    bash -c "[ $st = 0 ] && grep -q 'LEAK SUMMARY' '$WORK/shell/detach.err'"
"$HL" detach "$PID" >"$WORK/shell/detach2.out" 2>"$WORK/shell/detach2.err"
st=$?
ok "detach again: refused in one line, status 1" "status $st; $(cat "$WORK/shell/detach2.err")" \
    bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/shell/detach2.err') = 1 ] && grep -q 'not traced by an attach' '$WORK/shell/detach2.err'"
stop shell
ok "shell: the server ends as it would alone" "status $(cat "$WORK/shell/status")" ended_as_alone shell

# ---------------------------------------------------------------------------------------------
# 20 attach/detach cycles in a row, with 8 threads allocating
# ---------------------------------------------------------------------------------------------
server twenty 8 || fail "twenty: start" "no pid"
threads_before=$(grep Threads "/proc/$PID/status")
fds_before=$(fds "$PID")
good=0
for i in $(seq 1 20); do
    (cd "$WORK/twenty" && "$HL" attach -q --duration 0.1 --json "$WORK/twenty/r$i.json" "$PID" >/dev/null 2>"$WORK/twenty/a$i.err") &&
        python3 -c "
import json,sys
j=json.load(open('$WORK/twenty/r$i.json'))
# Every session names its blocks' stacks (the second used to have none: a second stacks table).
named=[r for r in j['leak_records']
       if any((f.get('file') or '').endswith('live_server.c') for f in r['stack'])]
sys.exit(0 if j['end']['how']=='detach' and j['trace_complete'] and j['calls']['malloc'] > 0
         and j['leak_records'] and len(named) == len(j['leak_records']) else 1)" && good=$((good + 1))
done
ok "20 attach/detach cycles on 8 allocating threads: each a complete trace, every record with its stack" "$good of 20; $(cat "$WORK"/twenty/a*.err | head -3)" [ "$good" = 20 ]
ok "20 cycles: the same threads and descriptors after" "$threads_before / $(grep Threads "/proc/$PID/status"); $fds_before / $(fds "$PID")" \
    bash -c "[ '$threads_before' = '$(grep Threads "/proc/$PID/status")' ] && [ '$fds_before' = '$(fds "$PID")' ]"
ok "20 cycles: the server ends as it would alone" "" stop twenty
ok "20 cycles: exit status 7, its output" "status $(cat "$WORK/twenty/status")" ended_as_alone twenty

# ---------------------------------------------------------------------------------------------
# Forks of an attached process (4 threads allocating meanwhile): each child has its own trace,
# complete, whether it ends by exit or by _exit (the C library's _exit, not the agent's, is what
# an attached process calls: its child's trace used to stop at its 15th event, with no end)
# ---------------------------------------------------------------------------------------------
d=$WORK/forks
mkdir -p "$d"
("$PROGS/attach_fork" "$d" 4 >"$d/out" 2>"$d/err"; echo $? >"$d/status") &
KIDS+=($!)
PID=""
for _ in $(seq 1 250); do [ -s "$d/pid" ] && PID=$(cat "$d/pid") && break; sleep 0.02; done
(cd "$d" && "$HL" attach -o "$d/t.%p.hl" "$PID" >"$d/attach.out" 2>"$d/attach.err")
st=$?
ok "forks: attached" "status $st; $(cat "$d/attach.err")" [ "$st" = 0 ]
for how in exit _exit; do
    rm -f "$d/forked"
    echo "$how" >"$d/fork"
    for _ in $(seq 1 500); do [ -s "$d/forked" ] && break; sleep 0.02; done
    child=$(cat "$d/forked" 2>/dev/null)
    "$HL" report -q --json "$d/$how.json" "$d/t.${child:-none}.hl" >/dev/null 2>"$d/$how.err"
    ok "forks: a child ending by $how has its trace, complete: 500 blocks made, 401 released, 100 of 48 B lost in child_block" \
        "child '${child}'; $(head -c 300 "$d/$how.err")" python3 -c "
import json,sys
j=json.load(open('$d/$how.json'))
t=j['totals']
lost=[r for r in j['leak_records'] if r['kind']=='definitely_lost' and r['stack'] and r['stack'][0].get('function')=='child_block']
sys.exit(0 if j['process']['fork_child'] and j['trace_complete'] and j['end']['how']=='exit' and j['end']['value']==0
         and t['allocations']==500 and t['frees']==401 and j['leaks']['definitely_lost']=={'bytes': 4800, 'blocks': 100}
         and sum(r['blocks'] for r in lost)==100 else 1)"
done
"$HL" detach "$PID" >"$d/detach.out" 2>"$d/detach.err"
st=$?
ok "forks: detach, status 0" "status $st; $(head -c 300 "$d/detach.err")" [ "$st" = 0 ]
touch "$d/stop"
for _ in $(seq 1 500); do [ -s "$d/status" ] && break; sleep 0.02; done
ok "forks: the process ends with status 0, nothing on stderr" "status $(cat "$d/status" 2>/dev/null); $(cat "$d/err")" \
    bash -c "[ '$(cat "$d/status" 2>/dev/null)' = 0 ] && [ ! -s '$d/err' ]"

# An attached process that execs (execl, which the C library makes an execve of inside itself):
# its trace ends there, complete, with what it made before (it used to have no end and none of
# its events since the writer's last pass)
d=$WORK/exec
mkdir -p "$d"
("$PROGS/attach_fork" "$d" >"$d/out" 2>"$d/err"; echo $? >"$d/status") &
KIDS+=($!)
PID=""
for _ in $(seq 1 250); do [ -s "$d/pid" ] && PID=$(cat "$d/pid") && break; sleep 0.02; done
(cd "$d" && "$HL" attach --duration 10 -o "$d/t.hl" --json "$d/r.json" "$PID" >"$d/attach.out" 2>"$d/attach.err"; echo $? >"$d/attach.status") &
KIDS+=($!)
for _ in $(seq 1 150); do grep -q "attached to process" "$d/attach.err" 2>/dev/null && break; sleep 0.02; done
touch "$d/exec"
for _ in $(seq 1 500); do [ -s "$d/attach.status" ] && break; sleep 0.02; done
ok "exec: the attached process's trace ends at its exec, complete: 50 blocks made, 25 released" \
    "$(head -c 400 "$d/attach.err")" python3 -c "
import json,sys
j=json.load(open('$d/r.json'))
t=j['totals']
sys.exit(0 if j['end']['how']=='exec' and j['trace_complete'] and t['allocations']==50 and t['frees']==25 else 1)"
ok "exec: the process ends as /bin/true does" "status $(cat "$d/status" 2>/dev/null)" \
    bash -c "[ '$(cat "$d/status" 2>/dev/null)' = 0 ] && [ ! -s '$d/err' ]"

# ---------------------------------------------------------------------------------------------
# Refusals: one line, status 1
# ---------------------------------------------------------------------------------------------
"$HL" attach 999999999 >/dev/null 2>"$WORK/gone.err"
st=$?
ok "attach to a pid that is gone" "status $st; $(cat "$WORK/gone.err")" \
    bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/gone.err') = 1 ] && grep -q 'no process 999999999' '$WORK/gone.err'"

mkdir -p "$WORK/run"
(cd "$WORK/run" && timeout 60 "$HL" run -q -o "$WORK/run/t.hl" -- "$PROGS/live_server" "$WORK/run" >/dev/null 2>&1) &
KIDS+=($!)
for _ in $(seq 1 250); do [ -s "$WORK/run/pid" ] && break; sleep 0.02; done
"$HL" attach "$(cat "$WORK/run/pid")" >/dev/null 2>"$WORK/run/attach.err"
st=$?
ok "attach to a process under heaplens run" "status $st; $(cat "$WORK/run/attach.err")" \
    bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/run/attach.err') = 1 ] && grep -q 'traced already' '$WORK/run/attach.err'"
touch "$WORK/run/stop"

if printf '#include <unistd.h>\nint main(void) { sleep(60); return 0; }\n' >"$WORK/static.c" &&
    cc -static -o "$WORK/static_sleep" "$WORK/static.c" 2>/dev/null; then
    "$WORK/static_sleep" &
    SP=$!
    KIDS+=($SP)
    sleep 0.2
    "$HL" attach "$SP" >/dev/null 2>"$WORK/static.err"
    st=$?
    ok "attach to a static binary" "status $st; $(cat "$WORK/static.err")" \
        bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/static.err') = 1 ] && grep -q 'statically linked' '$WORK/static.err'"
    ok "static binary: still running, untouched" "" kill -0 "$SP"
    kill "$SP"
else
    fail "attach to a static binary" "cannot build a static test program (libc6-dev's libc.a)"
fi

if command -v strace >/dev/null 2>&1; then
    strace -o /dev/null sleep 60 &
    KIDS+=($!)
    sleep 0.3
    TP=$(pgrep -n -x sleep)
    "$HL" attach "$TP" >/dev/null 2>"$WORK/traced.err"
    st=$?
    ok "attach to a process another tracer holds" "status $st; $(cat "$WORK/traced.err")" \
        bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/traced.err') = 1 ] && grep -q 'ptrace is not allowed' '$WORK/traced.err'"
    kill "$TP" 2>/dev/null
fi

(exec python3 -c "
import time
end = time.time() + 60
while time.time() < end: pass") &
BUSY=$!
KIDS+=($BUSY)
# Until the exec is done (under load it takes a while): bash itself waits in a system call.
for _ in $(seq 1 250); do [ "$(cat /proc/$BUSY/comm 2>/dev/null)" = python3 ] && break; sleep 0.02; done
sleep 0.2
"$HL" attach "$BUSY" >/dev/null 2>"$WORK/busy.err"
st=$?
ok "attach to a process that never waits in a system call" "status $st; $(cat "$WORK/busy.err")" \
    bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/busy.err') = 1 ] && grep -q 'no thread of it waited' '$WORK/busy.err'"
ok "busy process: still running" "" kill -0 "$BUSY"
kill "$BUSY"

"$HL" attach >/dev/null 2>"$WORK/nopid.err"
st=$?
ok "attach without a pid: usage line, status 2" "status $st" bash -c "[ $st = 2 ] && grep -q 'which process' '$WORK/nopid.err'"

finish
