#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# remote_sink.sh BUILD_DIR - the agent's socket sink (HEAPLENS_REMOTE): a trace sent to a collector
# over a UNIX socket and over loopback TCP reports as the file trace of the same program does;
# a collector that is not there, or goes away mid-run, costs the program nothing (one warning
# line, the trace goes on in a local file named in that line). The collector here is a small
# Python listener that writes what it receives to a file.
set -u
BUILD=$(cd "$1" && pwd)
HL="$BUILD/heaplens"
AGENT="$BUILD/libheaplens.so"
PROGS="$BUILD/programs"
D=$(mktemp -d /tmp/heaplens-remote.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$D"' EXIT
PASSED=0
FAILED=0
pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }

# collector ADDR OUT [KEEP_BYTES]: accepts one connection, writes what arrives to OUT; with
# KEEP_BYTES, closes the connection once that many bytes came (a collector that goes away).
collector() {
    python3 - "$@" <<'PY' &
import os, socket, sys
addr, out = sys.argv[1], sys.argv[2]
keep = int(sys.argv[3]) if len(sys.argv) > 3 else 0
if addr.startswith("unix:"):
    s = socket.socket(socket.AF_UNIX); s.bind(addr[5:])
else:
    s = socket.socket(socket.AF_INET); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0)); open(out + ".port", "w").write(str(s.getsockname()[1]))
s.listen(1)
s.settimeout(120) # a program that never connects fails its check, not the whole run
open(out + ".ready", "w").close()
try:
    c, _ = s.accept()
except socket.timeout:
    sys.exit(1)
c.settimeout(None)
got = 0
with open(out, "wb") as f:
    while True:
        b = c.recv(65536)
        if not b:
            break
        f.write(b); got += len(b)
        if keep and got >= keep:
            break
c.close()
PY
    for _ in $(seq 100); do [ -e "$2.ready" ] && return 0; sleep 0.05; done
    return 1
}

# totals TRACE: the report's totals and leaks that must match between two traces of one run
totals() {
    "$HL" report --json - "$1" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = d["totals"]; l = d["leaks"]
print(t["allocations"], t["frees"], t["bytes_allocated"], t["in_use_bytes"], t["in_use_blocks"],
      l["definitely_lost"]["bytes"], l["indirectly_lost"]["bytes"], l["still_reachable"]["bytes"],
      d["trace_complete"], d["scanned"])'
}

traced() { # PROG OUTPUT_TEMPLATE [REMOTE [ARGS...]]: the program under the agent, its stdout and status
    HEAPLENS_OUTPUT="$2" HEAPLENS_REMOTE="${3:-}" LD_PRELOAD="$AGENT" "$PROGS/$1" "${@:4}"
}

# The file trace of each program, for comparison.
for prog in reach_list churn_random; do
    traced $prog "$D/$prog.file.hl" >"$D/$prog.native.out" 2>/dev/null
    echo $? >"$D/$prog.native.status"
done

# 1, 2: over a UNIX socket and over loopback TCP, the same report.
for kind in unix tcp; do
    for prog in reach_list churn_random; do
        out="$D/$prog.$kind.hl"
        if [ $kind = unix ]; then addr="unix:$D/$prog.sock"; collector "$addr" "$out"
        else collector tcp "$out"; addr="tcp:127.0.0.1:$(cat "$out.port")"; fi
        traced $prog "$D/$prog.$kind.local.hl" "$addr" >"$D/out" 2>"$D/err"
        status=$?
        wait
        if [ -e "$D/$prog.$kind.local.hl" ] || [ -s "$D/err" ]; then
            fail "$kind $prog: nothing local" "$(ls "$D" | grep local) $(cat "$D/err")"
        elif [ "$status" != "$(cat "$D/$prog.native.status")" ] || ! cmp -s "$D/out" "$D/$prog.native.out"; then
            fail "$kind $prog: output and status" "status $status"
        elif [ "$(totals "$out")" != "$(totals "$D/$prog.file.hl")" ]; then
            fail "$kind $prog: same report as the file trace" "$(totals "$out") / $(totals "$D/$prog.file.hl")"
        else
            pass "$kind $prog: the collector's trace reports as the file trace ($(totals "$out" | cut -d' ' -f1-5))"
        fi
    done
done

# 3: no collector there: one warning line, the trace in a local file, the program unharmed.
for addr in "unix:$D/nobody.sock" "tcp:127.0.0.1:1" "tcp:not-an-address:80"; do
    rm -f "$D/fallback.hl"
    traced reach_list "$D/fallback.hl" "$addr" >"$D/out" 2>"$D/err"
    status=$?
    lines=$(grep -c . "$D/err")
    if [ "$status" != "$(cat "$D/reach_list.native.status")" ] || ! cmp -s "$D/out" "$D/reach_list.native.out"; then
        fail "unreachable $addr: output and status" "status $status"
    elif [ "$lines" != 1 ] || ! grep -q "cannot reach the collector $addr .*tracing to $D/fallback.hl instead" "$D/err"; then
        fail "unreachable $addr: one line naming the local file" "$(cat "$D/err")"
    elif [ "$(totals "$D/fallback.hl")" != "$(totals "$D/reach_list.file.hl")" ]; then
        fail "unreachable $addr: the local trace is whole" "$(totals "$D/fallback.hl")"
    else
        pass "unreachable $addr: one line, the whole trace in the local file, program unharmed"
    fi
done

# 4: the collector goes away mid-run (after the header and part of the first chunk): one line,
# then a new trace in a local file that begins with the blocks live then, and agrees with the
# file trace from there on (churn_random frees everything: nothing in use at the end, whatever
# the moment of the switch; threads_churn leaks 16 blocks). Single- and multi-threaded, and with
# 6 threads allocating flat out (threads_flat_out): some of them are waiting for ring space when
# the world is stopped for the switch, each with an event its block's entry in the live table
# already says.
# Each program waits halfway for a cue file (threads_flat_out runs until it) that the test makes
# once the agent has said it switched to the local file (the agent's samples keep it writing
# while the program waits): on a loaded machine the collector may read its bytes only after the
# program has made all its events, and nothing would be left to go to the local file. What comes
# after the cue is in the local trace: at least churn_random's second 100,000 pairs,
# threads_churn's 16 leaks, and threads_flat_out's pairs while the test looks for the line.
# prog:bytes the collector keeps:allocations the local trace holds at least
for case in churn_random:2048:100000 threads_churn:256:16 threads_flat_out:4096:1000; do
    IFS=: read -r prog keep least <<<"$case"
    rm -f "$D/gone.hl" "$D"/gone.remote.*
    [ -e "$D/$prog.file.hl" ] || { traced $prog "$D/$prog.file.hl" >"$D/$prog.native.out" 2>/dev/null; echo $? >"$D/$prog.native.status"; }
    collector "unix:$D/gone.$prog.sock" "$D/gone.remote.hl" "$keep"
    gone=$!
    rm -rf "$D/cue" && mkdir "$D/cue"
    traced $prog "$D/gone.hl" "unix:$D/gone.$prog.sock" "$D/cue" >"$D/out" 2>"$D/err" &
    run=$!
    wait "$gone"
    for _ in $(seq 600); do grep -q "went away" "$D/err" && break; sleep 0.05; done
    touch "$D/cue/go"
    wait "$run"
    status=$?
    read -r -a got <<<"$(totals "$D/gone.hl")"
    read -r -a want <<<"$(totals "$D/$prog.file.hl")"
    if [ "$status" != "$(cat "$D/$prog.native.status")" ] || ! cmp -s "$D/out" "$D/$prog.native.out"; then
        fail "collector gone, $prog: output and status" "status $status"
    elif [ "$(grep -c . "$D/err")" != 1 ] || ! grep -q "the collector unix:$D/gone.$prog.sock went away (.*): tracing to $D/gone.hl instead" "$D/err"; then
        fail "collector gone, $prog: one line naming the local file" "$(cat "$D/err")"
    elif [ "${#got[@]}" != 10 ] || [ "${got[3]}" != "${want[3]}" ] || [ "${got[4]}" != "${want[4]}" ] ||
         [ "${got[8]}" != True ] || [ "${got[0]}" -ge "${want[0]}" ] || [ "${got[0]}" -lt "$least" ]; then
        fail "collector gone, $prog: the local trace goes on from the switch" "${got[*]} / ${want[*]}"
    else
        pass "collector gone mid-run, $prog: one line, the local trace holds the rest (${got[0]} of ${want[0]} allocations; in use at the end ${got[3]} B in ${got[4]} blocks, as in the file trace)"
    fi
done

# 5: the collector goes away and no local file can be made: one line says tracing stops there,
# and nothing more is said (the agent does not try to reach the gone collector again, as it
# would to offer a shell once the process has run 0.3 s). The program runs on unharmed.
rm -f "$D/gone.remote.hl"* "$D"/gone.*.sock
collector "unix:$D/gone.stop.sock" "$D/gone.remote.hl" 4096
gone=$!
rm -rf "$D/cue" && mkdir "$D/cue"
traced threads_flat_out "$D/no/such/dir/t.hl" "unix:$D/gone.stop.sock" "$D/cue" >"$D/out" 2>"$D/err" &
run=$!
wait "$gone"
for _ in $(seq 600); do grep -q "went away" "$D/err" && break; sleep 0.05; done
sleep 0.5 # past the time the process would offer a shell
touch "$D/cue/go"
wait "$run"
status=$?
if [ "$status" != 0 ] || [ "$(cat "$D/out")" != "threads_flat_out done" ]; then
    fail "collector gone, no local file: output and status" "status $status"
elif [ "$(grep -c . "$D/err")" != 1 ] ||
     ! grep -q "the collector unix:$D/gone.stop.sock went away (.*) and .*; tracing stops here, the program goes on" "$D/err"; then
    fail "collector gone, no local file: one line" "$(cat "$D/err")"
else
    pass "collector gone and no local file: one line, tracing stops, the program runs on"
fi

# 6: the collector goes away while a thread is inside a realloc, in its watch callback
# (api_realloc_switch waits there for a cue): the block being resized is out of the live table
# and its FREE not yet made when the new trace's snapshot is taken. The snapshot still says it,
# and the local trace ends with what the file trace ends with in use.
RS="$BUILD/tests/api/api_realloc_switch"
if [ ! -x "$RS" ]; then
    fail "collector gone during a realloc" "no $RS (make $RS)"
else
    rm -rf "$D/cue" && mkdir "$D/cue" && touch "$D/cue/go"
    HEAPLENS_OUTPUT="$D/rs.file.hl" LD_PRELOAD="$AGENT" "$RS" "$D/cue" >"$D/rs.native.out" 2>/dev/null
    rm -rf "$D/cue" && mkdir "$D/cue"
    rm -f "$D"/gone.*
    collector "unix:$D/gone.rs.sock" "$D/gone.remote.hl" # keeps all it gets, until killed
    gone=$!
    HEAPLENS_OUTPUT="$D/rs.hl" HEAPLENS_REMOTE="unix:$D/gone.rs.sock" LD_PRELOAD="$AGENT" "$RS" "$D/cue" >"$D/out" 2>"$D/err" &
    run=$!
    for _ in $(seq 600); do [ -e "$D/cue/in_callback" ] && break; sleep 0.05; done
    kill "$gone"
    wait "$gone" 2>/dev/null
    for _ in $(seq 600); do grep -q "went away" "$D/err" && break; sleep 0.05; done
    touch "$D/cue/go"
    wait "$run"
    status=$?
    read -r -a got <<<"$(totals "$D/rs.hl")"
    read -r -a want <<<"$(totals "$D/rs.file.hl")"
    if [ "$status" != 0 ] || ! cmp -s "$D/out" "$D/rs.native.out"; then
        fail "collector gone during a realloc: output and status" "status $status"
    elif ! grep -q "went away" "$D/err"; then
        fail "collector gone during a realloc: the switch" "$(cat "$D/err")"
    elif [ "${#got[@]}" != 10 ] || [ "${got[3]}" != "${want[3]}" ] || [ "${got[4]}" != "${want[4]}" ] ||
         [ "${got[8]}" != True ]; then
        fail "collector gone during a realloc: the snapshot says the block being resized" "${got[*]} / ${want[*]}"
    else
        pass "collector gone during a realloc: the new trace's snapshot says the block being resized (in use at the end ${got[3]} B in ${got[4]} blocks, as in the file trace)"
    fi
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
