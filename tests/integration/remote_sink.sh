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
open(out + ".ready", "w").close()
c, _ = s.accept()
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

# 4: the collector goes away mid-run (after the header and part of the first chunk): one line, then a new trace in a local file that begins with the blocks live then, and
# agrees with the file trace from there on (churn_random frees everything: nothing in use at
# the end, whatever the moment of the switch; threads_churn leaks 16 blocks). Single- and
# multi-threaded.
# threads_churn's whole trace is 2 KiB: its collector leaves after 256 bytes, and its phase 2
# (16 threads, each leaking a block) begins only once the agent has said it switched to the local
# file (a cue file; the agent's samples keep it writing while the program waits): on a loaded
# machine the writer may send phase 1 only at the end, and nothing would be left to go there.
for prog_keep in churn_random:2048 threads_churn:256; do
    prog=${prog_keep%:*}
    rm -f "$D/gone.hl" "$D"/gone.remote.*
    [ -e "$D/$prog.file.hl" ] || { traced $prog "$D/$prog.file.hl" >"$D/$prog.native.out" 2>/dev/null; echo $? >"$D/$prog.native.status"; }
    collector "unix:$D/gone.$prog.sock" "$D/gone.remote.hl" "${prog_keep#*:}"
    if [ "$prog" = threads_churn ]; then
        gone=$!
        rm -rf "$D/cue" && mkdir "$D/cue"
        traced $prog "$D/gone.hl" "unix:$D/gone.$prog.sock" "$D/cue" >"$D/out" 2>"$D/err" &
        run=$!
        wait "$gone"
        for _ in $(seq 600); do grep -q "went away" "$D/err" && break; sleep 0.05; done
        touch "$D/cue/go"
        wait "$run"
        status=$?
    else
        traced $prog "$D/gone.hl" "unix:$D/gone.$prog.sock" >"$D/out" 2>"$D/err"
        status=$?
    fi
    wait
    read -r -a got <<<"$(totals "$D/gone.hl")"
    read -r -a want <<<"$(totals "$D/$prog.file.hl")"
    if [ "$status" != "$(cat "$D/$prog.native.status")" ] || ! cmp -s "$D/out" "$D/$prog.native.out"; then
        fail "collector gone, $prog: output and status" "status $status"
    elif [ "$(grep -c . "$D/err")" != 1 ] || ! grep -q "the collector unix:$D/gone.$prog.sock went away (.*): tracing to $D/gone.hl instead" "$D/err"; then
        fail "collector gone, $prog: one line naming the local file" "$(cat "$D/err")"
    elif [ "${#got[@]}" != 10 ] || [ "${got[3]}" != "${want[3]}" ] || [ "${got[4]}" != "${want[4]}" ] ||
         [ "${got[8]}" != True ] || [ "${got[0]}" -ge "${want[0]}" ] || [ "${got[0]}" -le 0 ] ||
         { [ "$prog" = threads_churn ] && [ "${got[0]}" -lt 16 ]; }; then
        fail "collector gone, $prog: the local trace goes on from the switch" "${got[*]} / ${want[*]}"
    else
        pass "collector gone mid-run, $prog: one line, the local trace holds the rest (${got[0]} of ${want[0]} allocations; in use at the end ${got[3]} B in ${got[4]} blocks, as in the file trace)"
    fi
done

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
