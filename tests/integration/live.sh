#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# live.sh BUILD_DIR - talking to a traced process while it runs: its control socket (private,
# gone with the process), `heaplens shell` scripted from stdin and interactive in tmux (status,
# top, leaks, mark / since, dump, quit), live scans while 8 threads allocate, and the program
# unharmed by all of it (its output and exit status).
# One line per check, "PASS name" or "FAIL name: reason"; the last line is "N passed, N failed".
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
PROGS=$BUILD/programs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-live.XXXXXX")
chmod 700 "$WORK"
RUNS=()
TMUX_SOCK=heaplens-live-$$
cleanup() {
    local p
    for p in "${RUNS[@]}"; do pkill -KILL -P "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    tmux -L "$TMUX_SOCK" kill-server 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
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
SOCKDIR=${TMPDIR:-/tmp}
case $SOCKDIR in /*) ;; *) SOCKDIR=/tmp ;; esac
SOCKDIR=$SOCKDIR/heaplens-$(id -u)

# start NAME [THREADS] [RUN_OPTION...]: live_server under heaplens run in $WORK/NAME; sets PID
# (the program's) and RUN (heaplens run's).
start() {
    local name=$1 threads=${2:-0}
    shift 2 2>/dev/null
    local d=$WORK/$name
    mkdir -p "$d"
    (cd "$d" && timeout -k 5 120 "$HL" run -q -o "$d/t.hl" "$@" -- "$PROGS/live_server" "$d" "$threads" \
        >"$d/out" 2>"$d/err"; echo $? >"$d/status") &
    RUN=$!
    RUNS+=("$RUN")
    PID=""
    for _ in $(seq 1 250); do
        [ -s "$d/pid" ] && PID=$(cat "$d/pid") && [ -S "$SOCKDIR/ctl.$PID" ] && return 0
        sleep 0.02
    done
    return 1
}
# stop NAME: ends the server, waits for heaplens run
stop() {
    touch "$WORK/$1/stop"
    for _ in $(seq 1 500); do [ -s "$WORK/$1/status" ] && return 0; sleep 0.02; done
    return 1
}
# launch NAME SECONDS [VAR=VALUE...] -- PROGRAM [ARGS...]: PROGRAM under heaplens run in
# $WORK/NAME (at most SECONDS), its environment given the assignments; sets PID once the program
# wrote $WORK/NAME/pid and its control socket is there (fails after 5 s).
launch() {
    local name=$1 secs=$2
    shift 2
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    local d=$WORK/$name
    mkdir -p "$d"
    (cd "$d" && env "${envs[@]}" timeout -k 5 "$secs" "$HL" run -q -o "$d/t.hl" -- "$@" \
        >"$d/out" 2>"$d/err"; echo $? >"$d/status") &
    RUNS+=("$!")
    PID=""
    for _ in $(seq 1 250); do
        [ -s "$d/pid" ] && PID=$(cat "$d/pid") && [ -S "$SOCKDIR/ctl.$PID" ] && return 0
        PID=""
        sleep 0.02
    done
    return 1
}
# shell NAME COMMANDS: heaplens shell PID with COMMANDS on stdin; output in $WORK/NAME/sh.N
SH_N=0
shell() {
    SH_N=$((SH_N + 1))
    SH=$WORK/$1/sh.$SH_N
    printf '%b' "$2" | timeout 60 "$HL" shell "$PID" >"$SH" 2>"$SH.err"
    SH_STATUS=$?
}

# ---------------------------------------------------------------------------------------------
# The socket: private, answers, goes away with the process
# ---------------------------------------------------------------------------------------------
if start basic 0; then
    pass "basic: the control socket appears"
else
    fail "basic: the control socket appears" "no $SOCKDIR/ctl.<pid>; $(head -c 300 "$WORK/basic/err")"
    finish
fi
ok "socket directory is 0700 and the user's" "$(stat -c '%a %u' "$SOCKDIR")" \
    [ "$(stat -c '%a %u' "$SOCKDIR")" = "700 $(id -u)" ]
ok "socket is 0600" "$(stat -c '%a' "$SOCKDIR/ctl.$PID")" [ "$(stat -c '%a' "$SOCKDIR/ctl.$PID")" = 600 ]
BASIC_PID=$PID

shell basic 'status\nleaks\n'
ok "status: the process, its threads and trace" "$(head -3 "$SH")" \
    grep -qE "^process $PID: 1 threads, trace $WORK/basic/t.hl" "$SH"
ok "status: report's summary of the trace so far" "$(head -5 "$SH")" \
    grep -q "^SUMMARY of $PROGS/live_server (pid $PID)" "$SH"
ok "leaks: a scan of the running process" "$(cat "$SH")" grep -qE "^scan at [0-9.]+ ms" "$SH"
ok "leaks: the heap now, not at exit" "$(grep 'in use' "$SH")" grep -q "==heaplens==     in use now: " "$SH"
ok "leaks: leak_early's blocks definitely lost, by stack" "$(grep -A1 'definitely lost in' "$SH")" \
    bash -c "grep -A1 'are definitely lost in loss record' '$SH' | grep -q 'leak_early (tests/programs/live_server.c'"
ok "leaks: the kept list still reachable" "$(grep 'still reachable' "$SH")" \
    grep -qE "still reachable: [1-9][0-9,]* bytes in [1-9][0-9,]* blocks" "$SH"
ok "leaks: no leak_late yet" "" bash -c "! grep -q leak_late '$SH'"
ok "leaks: no word of a missing end (the process runs on)" "$(cat "$SH.err")" bash -c "! grep -q 'no end' '$SH' '$SH.err'"
ok "shell: status 0, nothing on stderr" "status $SH_STATUS; $(cat "$WORK/basic/sh.1.err")" \
    bash -c "[ $SH_STATUS = 0 ] && [ ! -s '$WORK/basic/sh.1.err' ]"

# The server leaks from leak_late from now on; after the mark only leak_late leaks: since 1
# lists it and not leak_early (its loop looks for the file every 5 ms).
touch "$WORK/basic/late"
sleep 0.3
shell basic 'mark\n'
ok "mark: mark 1" "$(tail -1 "$SH")" grep -qE "^mark 1 at [0-9.]+ ms" "$SH"
sleep 0.3
shell basic 'since 1 5\ntop 3 sort leaked\ndump '"$WORK"'/basic/now.json\ndump '"$WORK"'/basic/now.html\nbogus\n'
since=$(awk '/^TOP 5 CALL SITES BY leaked/,/^$/' "$SH")
ok "since 1: leak_late's site first" "$since" bash -c "sed -n 3,4p <<<'$since' | grep -q 'at leak_late '"
ok "since 1: leak_early is not there (nothing of it was allocated after the mark)" "$since" \
    bash -c "! grep -q 'leak_early' <<<'$since'"
top=$(awk '/^TOP 3 CALL SITES BY leaked/,/^$/' "$SH")
ok "top 3 sort leaked: both leaking sites" "$top" bash -c "grep -q 'at leak_late ' <<<'$top' && grep -q 'at leak_early ' <<<'$top'"
ok "dump FILE.json: report's JSON of now" "$(grep wrote "$SH")" \
    python3 -c "import json,sys; j=json.load(open('$WORK/basic/now.json')); sys.exit(0 if j['process']['pid']==$PID else 1)"
ok "dump FILE.html: a page" "" grep -q "<html" "$WORK/basic/now.html"
ok "an unknown command: one line, the shell goes on" "$(tail -1 "$SH")" \
    grep -q "^unknown command 'bogus' (help lists them)" "$SH"

# Two scans: the second has the later leaks too; the exit report agrees with a scan made late.
shell basic 'leaks\n'
n1=$(sed -n 's/.*definitely lost: [0-9,]* bytes in \([0-9,]*\) blocks/\1/p' "$SH" | tr -d ,)
ok "leaks again: leak_late now definitely lost too" "$(grep -A1 'definitely lost in' "$SH")" \
    bash -c "grep -A1 'are definitely lost in loss record' '$SH' | grep -q 'leak_late (tests/programs/live_server.c'"

# stop ends the trace (scanned, END stop); start begins a new one, beginning with the blocks
# live then; the verdicts of the new trace still follow pointers through blocks made while
# tracing was stopped (the kept list runs through them: still reachable, nothing lost but the
# leaks).
shell basic 'stop\nstatus\nleaks\n'
ok "stop: said, the trace ended" "$(head -3 "$SH")" grep -q "^stopped: the trace $WORK/basic/t.hl has ended" "$SH"
ok "status while stopped: says so, names the last trace" "$(grep '^process' "$SH")" \
    grep -q "^process $PID: 1 threads, tracing stopped; its last trace $WORK/basic/t.hl" "$SH"
ok "leaks while stopped: refused in one line" "$(tail -2 "$SH")" grep -q "^tracing is stopped (start begins a new trace)" "$SH"
"$HL" report --json "$WORK/basic/stopped.json" -q "$WORK/basic/t.hl" 2>/dev/null
ok "the stopped trace: complete, END stop, scanned" "" python3 -c "
import json,sys
j=json.load(open('$WORK/basic/stopped.json'))
sys.exit(0 if j['end']['how']=='stop' and j['trace_complete'] and j['scanned'] else 1)"
sleep 0.3
shell basic 'start\nleaks\n'
ok "start: a new trace in a new file" "$(head -2 "$SH")" grep -q "^started: a new trace, $WORK/basic/t.hl.1" "$SH"
ok "start: a live scan of the new trace" "$(head -c 300 "$SH")" grep -q "^==heaplens== trace: $WORK/basic/t.hl.1" "$SH"
ok "start: the kept list, through blocks made while stopped, still reachable, nothing of it lost" "$(grep -B1 -A1 'lost in loss' "$SH" | head -8)" \
    bash -c "! grep -A1 'lost in loss record' '$SH' | grep -q 'keep_one'"

# depth: a new trace whose stacks have that many frames
shell basic 'depth 2\n'
ok "depth 2: a new trace" "$(cat "$SH")" bash -c "grep -q '^started: a new trace, $WORK/basic/t.hl.2' '$SH' && grep -q '^depth 2 from now on' '$SH'"
sleep 0.3
shell basic 'top 1 sort allocations\n'
frames=$(awk '/^#1 /{on=1; next} on && /^      (at|by) /{n++} on && !/^      (at|by) /{on=0} END{print n+0}' "$SH")
ok "depth 2: the new trace's stacks have 2 frames" "$frames frames; $(head -5 "$SH")" [ "$frames" = 2 ]
ok "depth 0: refused" "" bash -c "printf 'depth 0\n' | '$HL' shell $PID | grep -q '^depth takes 1 to 256'"

# grow: both sites that keep growing (leak_late's leaks, the kept list) over the last second
shell basic 'grow 1\n'
ok "grow 1: leak_late and keep_one grow in every quarter" "$(head -12 "$SH")" \
    bash -c "grep -q '^GROWING CALL SITES: live bytes rose in each of 4 parts of the window (2)' '$SH' &&
             grep -A1 '^#[12] ' '$SH' | grep -q 'at leak_late ' && grep -A1 '^#[12] ' '$SH' | grep -q 'at keep_one '"

ok "basic: the program ends as it would alone" "" stop basic
ok "basic: its exit status (7) and output" "status $(cat "$WORK/basic/status"); $(cat "$WORK/basic/out")" \
    bash -c "[ \"\$(cat '$WORK/basic/status')\" = 7 ] && [ \"\$(cat '$WORK/basic/out')\" = 'served 1' ]"
ok "basic: the socket is gone with the process" "" bash -c "[ ! -e '$SOCKDIR/ctl.$BASIC_PID' ]"
"$HL" report --json "$WORK/basic/final.json" -q "$WORK/basic/t.hl.2" 2>"$WORK/basic/report.err"
ok "basic: the trace with live scans in it reports as usual: complete, exit scan" "$(cat "$WORK/basic/report.err")" \
    python3 -c "
import json,sys
j=json.load(open('$WORK/basic/final.json'))
d=j['leaks']['definitely_lost']['blocks']
sys.exit(0 if j['trace_complete'] and j['end']['how']=='exit' and d >= $n1 else 1)"

# ---------------------------------------------------------------------------------------------
# Refusals: one line, status 1
# ---------------------------------------------------------------------------------------------
sleep 60 &
PLAIN=$!
"$HL" shell "$PLAIN" >"$WORK/plain.out" 2>"$WORK/plain.err"
st=$?
kill "$PLAIN" 2>/dev/null
ok "shell on an untraced process: one line, status 1" "status $st; $(cat "$WORK/plain.err")" \
    bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/plain.err') = 1 ] && grep -q 'is not traced by heaplens' '$WORK/plain.err'"
"$HL" shell 999999999 >"$WORK/gone.out" 2>"$WORK/gone.err"
st=$?
ok "shell on a pid that is gone: one line, status 1" "status $st; $(cat "$WORK/gone.err")" \
    bash -c "[ $st = 1 ] && [ \$(wc -l <'$WORK/gone.err') = 1 ] && grep -q 'no process 999999999' '$WORK/gone.err'"
"$HL" shell >"$WORK/nopid.out" 2>"$WORK/nopid.err"
st=$?
ok "shell without a pid: usage line, status 2" "status $st" bash -c "[ $st = 2 ] && grep -q 'which process' '$WORK/nopid.err'"

if start nocontrol 0 --no-control; then
    fail "control=0: no socket" "ctl.$PID exists"
else
    ok "control=0: no socket, the program runs" "" bash -c "[ -s '$WORK/nocontrol/pid' ]"
fi
stop nocontrol

# depth past what the threads' walks were made for (run with -d 2): each thread makes its walks
# again with room for the new depth, and its stacks have more frames than 2.
if start deeper 0 -d 2; then
    shell deeper 'depth 64\n'
    sleep 0.3
    shell deeper 'top 1 sort allocations\n'
    frames=$(awk '/^#1 /{on=1; next} on && /^      (at|by) /{n++} on && !/^      (at|by) /{on=0} END{print n+0}' "$SH")
    ok "depth 64 after -d 2: the new trace's stacks have their callers" "$frames frames; $(head -6 "$SH")" [ "$frames" -ge 3 ]
    ok "depth 64 after -d 2: the program ends as it would alone" "" stop deeper
    ok "depth 64 after -d 2: its exit status (7)" "status $(cat "$WORK/deeper/status")" [ "$(cat "$WORK/deeper/status")" = 7 ]
else
    fail "depth 64 after -d 2: the program starts" "$(head -c 300 "$WORK/deeper/err")"
fi

# A small block moved by realloc while tracing is stopped: its record goes (it used to stay, a
# block reported lost that the program had freed, its slot naming a block that was gone); once
# tracing starts again, a header block made at its address is released as the header block it
# is, and the new trace reports nothing lost.
d=$WORK/stopped_realloc
if ! launch stopped_realloc 60 GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0 \
    -- "$PROGS/stopped_realloc" "$d"; then
    fail "realloc while stopped: the program starts" "$(head -c 300 "$d/err")"
else
    shell stopped_realloc 'stop\n'
    touch "$d/stopped"
    sleep 0.2
    shell stopped_realloc 'start\n'
    touch "$d/started"
    for _ in $(seq 1 500); do [ -s "$d/status" ] && break; sleep 0.02; done
    ok "realloc while stopped: the header block took the moved block's address" "$(cat "$d/out")" grep -q "^same 1$" "$d/out"
    ok "realloc while stopped: its release is the header block's, the program ends as alone" \
        "status $(cat "$d/status"); $(head -c 300 "$d/err")" \
        bash -c "[ \"\$(cat '$d/status')\" = 0 ] && grep -q '^done$' '$d/out'"
    "$HL" report -q --json "$d/after.json" "$d/t.hl.1" 2>"$d/report.err"
    ok "realloc while stopped: the moved block is not reported lost (everything was freed)" \
        "$(head -c 300 "$d/report.err")" python3 -c "
import json,sys
j=json.load(open('$d/after.json'))
l=j['leaks']
sys.exit(0 if j['trace_complete'] and l['definitely_lost']['blocks'] == 0 and l['indirectly_lost']['blocks'] == 0 and l['possibly_lost']['blocks'] == 0 else 1)"
fi

# ---------------------------------------------------------------------------------------------
# leaks leak: only the blocks earlier scans reported lost, judged again (relink.c: 10 lost blocks
# linked back in, 2 of 5 released, 4 new leaks the re-check must not list until a full scan saw
# them)
# ---------------------------------------------------------------------------------------------
# sh_leaks FILE KIND: "BYTES/BLOCKS" of that summary line (definitely lost, still reachable)
sh_sum() { sed -n "s/^==heaplens== *$2: \([0-9]*\) bytes in \([0-9]*\) blocks.*/\1\/\2/p" "$1" | head -1; }
d=$WORK/relink
if ! launch relink 120 -- "$PROGS/relink" "$d"; then
    fail "leaks leak: relink starts" "$(head -c 300 "$d/err")"
else
    shell relink 'leaks leak\n'
    ok "leaks leak before any scan: nothing found lost before" "$(cat "$SH")" \
        grep -q "^0 found lost before, 0 of them released since" "$SH"
    shell relink 'leaks\n'
    ok "leaks: groups A and B definitely lost (600 B in 15)" "$(grep 'lost' "$SH")" \
        [ "$(sh_sum "$SH" 'definitely lost')" = 600/15 ]
    touch "$d/step"
    for _ in $(seq 1 250); do [ -e "$d/stepped" ] && break; sleep 0.02; done
    shell relink 'leaks leak\n'
    L1=$SH
    ok "leaks leak: 15 found lost before, 2 of them released since" "$(grep found "$L1")" \
        grep -q "^15 found lost before, 2 of them released since" "$L1"
    ok "leaks leak: the relinked 10 read still reachable now" "$(grep reachable "$L1")" \
        [ "$(sh_sum "$L1" 'still reachable')" = 480/10 ]
    ok "leaks leak: B's other 3 still lost, the 4 new leaks not listed" "$(grep 'lost' "$L1")" \
        [ "$(sh_sum "$L1" 'definitely lost')" = 72/3 ]
    shell relink 'leaks leak\nleaks\nleaks leak\n'
    ok "leaks leak again: only the 3 still lost are looked at" "$(grep found "$SH")" \
        grep -q "^3 found lost before, 0 of them released since" "$SH"
    ok "leaks, then leaks leak: the new leaks are in the set once a full scan listed them" \
        "$(grep found "$SH")" grep -q "^7 found lost before, 0 of them released since" "$SH"
    ok "leaks leak: C (384 B in 4) and B's 3 (72 B) definitely lost" "$(grep 'lost' "$SH" | tail -4)" \
        [ "$(grep -c '456 bytes in 7 blocks' "$SH")" = 2 ]
    shell relink 'leaks lost\n'
    ok "leaks with a wrong word: one line saying what it takes" "$(cat "$SH")" \
        grep -q "^leaks: expected \`leaks\`, \`leaks all\`, \`leaks new\` or \`leaks leak\`, got 'lost'" "$SH"
    touch "$d/stop"
    for _ in $(seq 1 500); do [ -s "$d/status" ] && break; sleep 0.02; done
    ok "relink: its output and exit status unharmed" "$(cat "$d/out" "$d/status")" \
        [ "$(cat "$d/out")" = relinked ] && [ "$(cat "$d/status")" = 0 ]
fi

# ---------------------------------------------------------------------------------------------
# watch: a block the server releases once DIR/late exists, said with where (host-side symbols)
# ---------------------------------------------------------------------------------------------
if start watch 0; then
    EARLY=$(cat "$WORK/watch/early")
    shell watch "watch $EARLY\nwatch 0x10\n"
    ok "watch ADDR: watching the live block" "$(cat "$SH")" grep -q "^watching $EARLY size=40" "$SH"
    ok "watch 0x10: no live block there, one line" "$(cat "$SH")" grep -q "^no live block at 0x10" "$SH"
    touch "$WORK/watch/late"
    sleep 0.3
    shell watch 'watch\n'
    ok "watch: its release is said, at main in live_server.c" "$(cat "$SH")" \
        grep -q "^watch: the block at $EARLY was released at 0x[0-9a-f]* (main, tests/programs/live_server.c:[0-9]*)" "$SH"
    ok "watch: with the release's whole stack, from the trace: main, then libc's start" "$(cat "$SH")" \
        bash -c "grep -A1 '^watch: the block' '$SH' | grep -q '^    at 0x[0-9a-f]*: main (tests/programs/live_server.c:[0-9]*)' &&
                 grep -q '^    by 0x[0-9a-f]*: __libc_start' '$SH'"
    stop watch
    ok "watch: the server ends as it would alone" "" bash -c "[ \"\$(cat '$WORK/watch/status')\" = 7 ]"
else
    fail "watch: start" "$(head -c 300 "$WORK/watch/err")"
fi

# ---------------------------------------------------------------------------------------------
# run --alert-growth: after the report, the growing sites at or above the rate
# ---------------------------------------------------------------------------------------------
for rate in 1 1000000000; do
    d=$WORK/alert$rate
    mkdir -p "$d"
    (cd "$d" && timeout -k 5 60 "$HL" run --alert-growth "$rate/s" -o "$d/t.hl" -- "$PROGS/live_server" "$d" \
        >"$d/out" 2>"$d/err"; echo $? >"$d/status") &
    RUNS+=($!)
    sleep 1
    touch "$d/stop"
    for _ in $(seq 1 500); do [ -s "$d/status" ] && break; sleep 0.02; done
done
ok "run --alert-growth 1/s: leak_early and keep_one, leak_early first" "$(grep -A1 'GROWING' "$WORK/alert1/err")" \
    bash -c "grep -q '^==heaplens== GROWING CALL SITES: .* by 1 bytes/s or more (2)' '$WORK/alert1/err' &&
             grep -A1 '^==heaplens== #1 ' '$WORK/alert1/err' | grep -q 'at leak_early '"
ok "run --alert-growth 1000000000/s: none that fast" "$(grep -A1 'GROWING' "$WORK/alert1000000000/err")" \
    grep -q "(no call site grew in every part)" "$WORK/alert1000000000/err"
ok "run --alert-growth: the program's output and status untouched" "" \
    bash -c "[ \"\$(cat '$WORK/alert1/status')\" = 7 ] && [ \"\$(cat '$WORK/alert1/out')\" = 'served 1' ]"
# While it runs: with a window of 1 s, each growing site is said once, before the report.
d=$WORK/alertlive
mkdir -p "$d"
(cd "$d" && timeout -k 5 60 "$HL" run --alert-growth 1000/s --alert-window 1 -o "$d/t.hl" -- "$PROGS/live_server" "$d" \
    >"$d/out" 2>"$d/err"; echo $? >"$d/status") &
RUNS+=($!)
for _ in $(seq 1 150); do grep -q '^==heaplens== growing at' "$d/err" 2>/dev/null && break; sleep 0.02; done
sleep 1
touch "$d/stop"
for _ in $(seq 1 500); do [ -s "$d/status" ] && break; sleep 0.02; done
ok "run --alert-growth --alert-window 1: leak_early said while it runs, before the report" "$(head -3 "$d/err")" \
    bash -c "grep -m1 -n '' '$d/err' | grep -q '^1:==heaplens== growing at [0-9.]* s: [0-9,]* bytes/s from leak_early (tests/programs/live_server.c:[0-9]*), live'"
ok "run --alert-growth --alert-window 1: each site once" "$(grep -c 'growing at' "$d/err") lines" \
    bash -c "[ \$(grep -c 'growing at .* from leak_early ' '$d/err') = 1 ] && [ \$(grep -c 'growing at .* from keep_one ' '$d/err') -le 1 ]"
ok "run --alert-growth --alert-window 1: the program's output and status untouched" "" \
    bash -c "[ \"\$(cat '$d/status')\" = 7 ] && [ \"\$(cat '$d/out')\" = 'served 1' ]"

# ---------------------------------------------------------------------------------------------
# run --wait: the program starts once a shell has connected
# ---------------------------------------------------------------------------------------------
mkdir -p "$WORK/wait"
(cd "$WORK/wait" && timeout -k 5 120 "$HL" run -q --wait -o "$WORK/wait/t.hl" -- "$PROGS/live_server" "$WORK/wait" \
    >"$WORK/wait/out" 2>"$WORK/wait/err"; echo $? >"$WORK/wait/status") &
RUNS+=($!)
WPID=""
for _ in $(seq 1 250); do
    WPID=$(sed -n 's/.*waiting for `heaplens shell \([0-9]*\)` before the program starts.*/\1/p' "$WORK/wait/err")
    [ -n "$WPID" ] && break
    sleep 0.02
done
ok "run --wait: one line names the pid to connect to" "$(cat "$WORK/wait/err")" [ -n "$WPID" ]
sleep 0.5
ok "run --wait: main has not started yet" "" bash -c "[ ! -e '$WORK/wait/pid' ]"
PID=$WPID
shell wait 'mark\n'
ok "run --wait: the shell connects and marks before main" "$(cat "$SH" "$SH.err")" grep -q "^mark 1 at" "$SH"
for _ in $(seq 1 250); do [ -e "$WORK/wait/pid" ] && break; sleep 0.02; done
ok "run --wait: then the program runs" "" test -e "$WORK/wait/pid"
ok "run --wait: it ends as it would alone" "" stop wait
ok "run --wait: exit status 7, its output" "status $(cat "$WORK/wait/status")" \
    bash -c "[ \"\$(cat '$WORK/wait/status')\" = 7 ] && [ \"\$(cat '$WORK/wait/out')\" = 'served 1' ]"

# ---------------------------------------------------------------------------------------------
# Live scans while 8 threads allocate
# ---------------------------------------------------------------------------------------------
if start threads 8; then
    shell threads 'leaks\nleaks\nleaks\nstatus\n'
    ok "8 threads: three scans, each with leak_early's record" "$(grep -c 'definitely lost in loss record' "$SH") records; $(cat "$SH.err")" \
        bash -c "[ \$(grep -A1 'definitely lost in loss record' '$SH' | grep -c 'at .*leak_early') = 3 ]"
    ok "8 threads: status counts 9 threads" "$(grep '^process' "$SH")" grep -qE "^process $PID: 9 threads" "$SH"
    ok "8 threads: the program ends as it would alone" "" stop threads
    ok "8 threads: exit status 7, its output" "status $(cat "$WORK/threads/status")" \
        bash -c "[ \"\$(cat '$WORK/threads/status')\" = 7 ] && [ \"\$(cat '$WORK/threads/out')\" = 'served 1' ]"
    "$HL" report --json "$WORK/threads/final.json" -q "$WORK/threads/t.hl" 2>/dev/null
    ok "8 threads: the trace is complete, ended by the exit, every worker's block released" "" \
        python3 -c "
import json,sys
j=json.load(open('$WORK/threads/final.json'))
live={tuple(f['function'] for f in r['stack'][:1]) for r in j['leak_records']}
sys.exit(0 if j['trace_complete'] and j['end']['how']=='exit' and ('worker',) not in live else 1)"
else
    fail "8 threads: start" "$(head -c 300 "$WORK/threads/err")"
fi

# ---------------------------------------------------------------------------------------------
# Interactive, in a terminal (tmux)
# ---------------------------------------------------------------------------------------------
if command -v tmux >/dev/null 2>&1; then
    if start tty 0; then
        tmux -L "$TMUX_SOCK" new-session -d -x 160 -y 50 "$HL shell $PID; echo SHELL-ENDED \$?; sleep 30"
        pane() { tmux -L "$TMUX_SOCK" capture-pane -p -S -200; }
        wait_for() { for _ in $(seq 1 250); do pane | grep -q "$1" && return 0; sleep 0.02; done; return 1; }
        ok "tty: a prompt" "$(pane | tail -3)" wait_for "^heaplens $PID>"
        tmux -L "$TMUX_SOCK" send-keys "status" Enter
        ok "tty: status answers" "$(pane | tail -5)" wait_for "SUMMARY of "
        tmux -L "$TMUX_SOCK" send-keys "leaks" Enter
        ok "tty: leaks answers" "$(pane | tail -5)" wait_for "LEAK SUMMARY"
        # leaks new twice: the server leaks from leak_late only from before the first on, so
        # the second lists leak_late's later blocks and nothing of leak_early's
        touch "$WORK/tty/late"
        sleep 0.3
        tmux -L "$TMUX_SOCK" send-keys "leaks new" Enter
        ok "tty: leaks new" "$(pane | tail -3)" wait_for "scan at .*: the blocks made since the previous scan"
        sleep 0.3
        tmux -L "$TMUX_SOCK" send-keys "clear" Enter "leaks new" Enter
        ok "tty: leaks new again" "$(pane | tail -3)" wait_for "unknown command 'clear'"
        for _ in $(seq 1 250); do pane | sed -n "/unknown command 'clear'/,\$p" | grep -q "LEAK SUMMARY" && break; sleep 0.02; done
        second=$(pane | sed -n "/unknown command 'clear'/,\$p")
        ok "tty: the second leaks new lists only the later leaks (leak_late, not leak_early)" "$second" \
            bash -c "grep -A1 'definitely lost in loss record' <<<'$second' | grep -q 'at .*leak_late' &&
                     ! grep -q 'leak_early' <<<'$second'"
        tmux -L "$TMUX_SOCK" send-keys "mark" Enter
        ok "tty: mark" "$(pane | tail -3)" wait_for "mark 1 at"
        tmux -L "$TMUX_SOCK" send-keys "since 1" Enter
        ok "tty: since 1" "$(pane | tail -3)" wait_for "TOP 10 CALL SITES BY leaked"
        tmux -L "$TMUX_SOCK" send-keys "top 3" Enter
        ok "tty: top 3" "$(pane | tail -3)" wait_for "TOP 3 CALL SITES BY bytes"
        tmux -L "$TMUX_SOCK" send-keys "stop" Enter
        ok "tty: stop" "$(pane | tail -3)" wait_for "stopped: the trace"
        tmux -L "$TMUX_SOCK" send-keys "start" Enter
        ok "tty: start" "$(pane | tail -3)" wait_for "started: a new trace"
        # line editing: tab completion, history, the cursor moved to insert
        tmux -L "$TMUX_SOCK" send-keys "ma" Tab Enter
        ok "tty: 'ma' Tab completes mark" "$(pane | tail -3)" wait_for "mark 2 at"
        tmux -L "$TMUX_SOCK" send-keys Up Enter
        ok "tty: Up runs the last line again" "$(pane | tail -3)" wait_for "mark 3 at"
        tmux -L "$TMUX_SOCK" send-keys "mrk" Left Left "a" Enter
        ok "tty: Left twice, then a: 'mrk' becomes 'mark'" "$(pane | tail -3)" wait_for "mark 4 at"
        tmux -L "$TMUX_SOCK" send-keys "st" Tab
        ok "tty: 'st' Tab lists start, status, stop" "$(pane | tail -3)" wait_for "^start  status  stop$"
        tmux -L "$TMUX_SOCK" send-keys C-u "quit" Enter
        ok "tty: quit ends the shell with status 0" "$(pane | tail -3)" wait_for "^SHELL-ENDED 0"
        ok "tty: the process runs on after the shell" "" kill -0 "$PID"
        stop tty
        ok "tty: exit status 7" "status $(cat "$WORK/tty/status")" bash -c "[ \"\$(cat '$WORK/tty/status')\" = 7 ]"
    else
        fail "tty: start" "$(head -c 300 "$WORK/tty/err")"
    fi
else
    fail "tty" "tmux is not installed"
fi

finish
