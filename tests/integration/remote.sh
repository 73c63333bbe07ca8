#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# remote.sh BUILD_DIR - the collector (heaplens server) and traced programs that send their trace
# to it. Checks: a stream arrives byte for byte as the trace, named from its process record,
# private (0600), over a UNIX socket and loopback TCP; listeners are refused where they would be
# open to others (a shared socket directory, a non-loopback address without a token, a token
# file others can read); a wrong or missing token gets nothing written; a target that goes away
# mid-stream leaves a trace cut short that still reports; and programs traced with
# `heaplens run --remote` give the same report as with a local trace file, and run unharmed
# when the collector is missing or killed.
# One line per check, "PASS name" or "FAIL name: reason"; the last line is "N passed, N failed".
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
PROGS=$BUILD/programs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-remote.XXXXXX")
chmod 700 "$WORK"
SERVERS=()
cleanup() {
    local p
    for p in "${SERVERS[@]}"; do pkill -KILL -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT
PASSED=0
FAILED=0
TIMEOUT=30

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }
expect() { # expect NAME WANT GOT
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected '$2', got '$3'"; fi
}

[ -x "$HL" ] || { fail setup "$HL missing (make all)"; finish; }

# A real trace to send: alloc_basic's.
REF=$WORK/ref.hl
(cd "$WORK" && "$HL" run -q -o "$REF" -- "$PROGS/alloc_basic" >/dev/null 2>&1)
[ -s "$REF" ] || { fail setup "no reference trace"; finish; }

# start_server NAME ARGS...: starts `heaplens server ARGS` in the background; sets SRV (pid) and
# ADDR (what it says it listens on), waiting for its first line.
start_server() {
    local name=$1
    shift
    local log=$WORK/$name.log
    timeout -k 5 60 "$HL" server "$@" >"$log" 2>"$log.err" &
    SRV=$!
    SERVERS+=("$SRV")
    ADDR=""
    for _ in $(seq 1 200); do
        ADDR=$(sed -n 's/^heaplens: listening on //p' "$log" 2>/dev/null)
        [ -n "$ADDR" ] && return 0
        kill -0 "$SRV" 2>/dev/null || break
        sleep 0.02
    done
    return 1
}

# send ADDR FILE [TOKEN_LINE] [BYTES]: connects and sends the line, then FILE's first BYTES.
send() {
    python3 - "$@" <<'PYEOF'
import socket, sys
addr, path = sys.argv[1], sys.argv[2]
line = sys.argv[3].encode() if len(sys.argv) > 3 and sys.argv[3] else b""
data = open(path, "rb").read()
if len(sys.argv) > 4:
    data = data[: int(sys.argv[4])]
if addr.startswith("unix:"):
    s = socket.socket(socket.AF_UNIX)
    s.connect(addr[5:])
else:
    host, port = addr[4:].rsplit(":", 1)
    s = socket.create_connection((host.strip("[]"), int(port)))
s.sendall(line + data)
s.close()
PYEOF
}

# ================================================================================================
# A UNIX socket in a private directory: two streams, two traces, byte for byte.
D=$WORK/unix
mkdir -p "$D/out" && chmod 700 "$D"
if start_server unix --listen "unix:$D/c.sock" -o "$D/out" --count 2; then
    pass "server on a UNIX socket: says where it listens ($ADDR)"
    expect "UNIX socket mode" "600" "$(stat -c %a "$D/c.sock")"
    send "$ADDR" "$REF"
    send "$ADDR" "$REF"
    wait "$SRV"
    expect "server --count 2: exit status" 0 $?
    pid=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["process"]["pid"])' < <("$HL" report -q --json - "$REF" 2>/dev/null))
    T1=$D/out/heaplens.alloc_basic.$pid.hl
    if cmp -s "$REF" "$T1" && cmp -s "$REF" "$T1.1"; then
        pass "UNIX socket: both streams kept byte for byte, named heaplens.PROG.PID.hl and .1"
    else
        fail "UNIX socket: traces" "$(ls "$D/out")"
    fi
    expect "received trace mode" "600" "$(stat -c %a "$T1" 2>/dev/null)"
    [ ! -e "$D/c.sock" ] && pass "the socket is removed when the server ends" || fail "socket left" "$D/c.sock"
else
    fail "server on a UNIX socket" "did not start: $(cat "$WORK/unix.log.err")"
fi

# unix: alone: a private directory of the server's making.
if start_server unixauto --listen unix: -o "$WORK" --duration 1; then
    sock=${ADDR#unix:}
    expect "unix: alone: the socket's directory is private" "700" "$(stat -c %a "$(dirname "$sock")")"
    wait "$SRV"
    [ ! -e "$(dirname "$sock")" ] && pass "unix: alone: its directory is removed at the end" ||
        fail "unix: alone" "$(dirname "$sock") left behind"
else
    fail "server --listen unix:" "did not start: $(cat "$WORK/unixauto.log.err")"
fi

# ================================================================================================
# Loopback TCP on a free port.
D=$WORK/tcp
mkdir -p "$D"
if start_server tcp --listen tcp:127.0.0.1:0 -o "$D" --count 1; then
    case "$ADDR" in tcp:127.0.0.1:[1-9]*) pass "TCP: a free loopback port ($ADDR)" ;; *) fail "TCP address" "$ADDR" ;; esac
    send "$ADDR" "$REF"
    wait "$SRV"
    n=$(ls "$D"/heaplens.alloc_basic.*.hl 2>/dev/null | wc -l)
    t=$(ls "$D"/heaplens.alloc_basic.*.hl 2>/dev/null | head -1)
    if [ "$n" = 1 ] && cmp -s "$REF" "$t"; then pass "TCP: the stream kept byte for byte"; else fail "TCP trace" "$(ls "$D")"; fi
    if "$HL" report -q --json "$D/r.json" "$t" 2>/dev/null && "$HL" report -q --json "$D/ref.json" "$REF" 2>/dev/null &&
        python3 - "$D/r.json" "$D/ref.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("totals", "calls", "leaks", "end")
sys.exit(0 if all(a[k] == b[k] for k in keys) else 1)
PYEOF
    then
        pass "TCP: the received trace reports as the original (totals, calls, leaks, end)"
    else
        fail "TCP: report of the received trace" "differs from the original's"
    fi
else
    fail "server on loopback TCP" "did not start: $(cat "$WORK/tcp.log.err")"
fi

# ================================================================================================
# Refusals: each one line, exit status 2, nothing listening.
refused() { # refused NAME WANT_PATTERN ARGS...
    local name=$1 pat=$2
    shift 2
    timeout -k 5 10 "$HL" server "$@" >"$WORK/ref.out" 2>"$WORK/ref.err"
    local st=$?
    if [ "$st" = 2 ] && [ "$(wc -l <"$WORK/ref.err")" = 1 ] && grep -q -- "$pat" "$WORK/ref.err"; then
        pass "$name: refused in one line"
    else
        fail "$name" "status $st: $(head -c 300 "$WORK/ref.err")"
    fi
}
refused "non-loopback TCP without a token" "needs --token" --listen tcp:0.0.0.0:0
mkdir -p "$WORK/shared" && chmod 1777 "$WORK/shared"
refused "UNIX socket in a directory others may enter" "nobody else may enter" --listen "unix:$WORK/shared/c.sock"
printf 'secret\n' >"$WORK/open.token" && chmod 644 "$WORK/open.token"
refused "token file others may read" "nobody else may read" --listen tcp:127.0.0.1:0 --token "$WORK/open.token"
refused "no --listen" "--listen ADDR is required"
refused "a bad address" "bad address" --listen udp:1
refused "an unknown option" "unknown option" --listen unix: --frobnicate

# ================================================================================================
# A token: any address may listen; only a connection that sends it first is kept.
D=$WORK/token
mkdir -p "$D"
printf 'k3y-%s\n' "$RANDOM$RANDOM" >"$D/token" && chmod 600 "$D/token"
TOK=$(cat "$D/token")
if start_server token --listen tcp:127.0.0.1:0 -o "$D" --token "$D/token" --count 1 --duration 30; then
    send "$ADDR" "$REF" "HEAPLENS-TOKEN wrong-token
"
    send "$ADDR" "$REF" ""
    send "$ADDR" "$REF" "HEAPLENS-TOKEN $TOK
"
    wait "$SRV"
    n=$(ls "$D"/heaplens.*.hl* 2>/dev/null | wc -l)
    expect "token: only the connection with the right token is kept" 1 "$n"
    grep -q "wrong token" "$WORK/token.log.err" && pass "token: a wrong token is said" ||
        fail "token: wrong token" "$(cat "$WORK/token.log.err")"
    t=$(ls "$D"/heaplens.*.hl 2>/dev/null | head -1)
    cmp -s "$REF" "$t" && pass "token: the trace after the token line is the trace" ||
        fail "token: trace" "differs"
    [ -z "$(ls -A "$D" | grep '\.part$')" ] && pass "token: nothing is left of refused connections" ||
        fail "token: leftovers" "$(ls -A "$D")"
else
    fail "server with a token" "did not start: $(cat "$WORK/token.log.err")"
fi

# ================================================================================================
# A target that goes away mid-stream: the trace is kept, cut short, and still reports (a trace
# of many chunks, cut two thirds in).
D=$WORK/cut
mkdir -p "$D"
BIG=$WORK/big.hl
(cd "$WORK" && "$HL" run -q -o "$BIG" -- "$PROGS/churn_random" >/dev/null 2>&1)
half=$(($(stat -c %s "$BIG") * 2 / 3))
if start_server cut --listen tcp:127.0.0.1:0 -o "$D" --count 1; then
    send "$ADDR" "$BIG" "" "$half"
    wait "$SRV"
    t=$(ls "$D"/heaplens.*.hl 2>/dev/null | head -1)
    if [ -n "$t" ] && [ "$(stat -c %s "$t")" = "$half" ]; then
        pass "a stream cut short is kept ($half bytes)"
        "$HL" report -q --json "$D/r.json" "$t" >/dev/null 2>"$D/r.err"
        st=$?
        if [ "$st" = 0 ] && python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["trace_complete"] is not False)' "$D/r.json"; then
            pass "the cut trace reports, trace_complete false"
        else
            fail "the cut trace" "report status $st: $(head -c 200 "$D/r.err")"
        fi
    else
        fail "a stream cut short" "$(ls -la "$D")"
    fi
else
    fail "server for a cut stream" "did not start"
fi

# ================================================================================================
# Host-side symbols: a target without debug information (stripped, its debug file kept apart,
# as on a device); on the host, --sysroot finds the binary and --debug-dir its debug file by
# build-id: the report names every frame of the program with its source line.
D=$WORK/symbols
mkdir -p "$D/target"
SRCP=$(cd "$(dirname "$0")/../programs" && pwd)
if gcc -O1 -g -Wl,--build-id -I"$SRCP" -o "$D/target/prog" "$SRCP/exit_underscore.c" &&
    objcopy --only-keep-debug "$D/target/prog" "$D/prog.debug" && strip --strip-all "$D/target/prog"; then
    BID=$(readelf -n "$D/target/prog" | awk '/Build ID/ { print $3 }')
    mkdir -p "$D/debug/.build-id/${BID:0:2}"
    mv "$D/prog.debug" "$D/debug/.build-id/${BID:0:2}/${BID:2}.debug"
    (cd "$D" && "$HL" run -q -o "$D/t.hl" -- "$D/target/prog" >/dev/null 2>&1)
    mkdir -p "$D/sysroot$D/target"
    mv "$D/target/prog" "$D/sysroot$D/target/prog" # gone from where it ran, as on another host
    leak_frames() { "$HL" report -q --json - "$@" "$D/t.hl" 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
r = [r for r in j["leak_records"] if r["kind"] == "definitely_lost"][0]
print(" ".join("%s:%s" % (f.get("function"), f.get("line")) for f in r["stack"][:2]))'; }
    expect "stripped target, no host symbols: frames unnamed" "None:0 None:0" "$(leak_frames)"
    expect "--sysroot and --debug-dir: the program's frames with their lines" \
        "leak_before_underscore_exit:8 main:19" "$(leak_frames --sysroot "$D/sysroot" --debug-dir "$D/debug")"
    "$HL" report -q --debug-dir relative/dir "$D/t.hl" >/dev/null 2>"$D/err"
    st=$?
    [ "$st" = 2 ] && [ "$(wc -l <"$D/err")" = 1 ] && pass "--debug-dir with a relative path: refused in one line" ||
        fail "--debug-dir relative" "status $st: $(cat "$D/err")"
else
    fail "host-side symbols: setup" "cannot build and strip a program"
fi

# ================================================================================================
# heaplens run --remote: the program's trace goes to the collector, which keeps it as the trace
# heaplens run would have written itself; the program's output and exit status as natively.
summary_of() { # TRACE: the figures that must match between two traces of one deterministic run
    "$HL" report -q --json - "$1" 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
t, l = j["totals"], j["leaks"]
print(t["allocations"], t["frees"], t["bytes_allocated"], t["in_use_bytes"],
      " ".join("%s=%d/%d" % (k, v["bytes"], v["blocks"]) for k, v in sorted(l.items())),
      j["calls"]["malloc"], j["trace_complete"], j["scanned"], j["end"]["how"], j["end"]["value"])'
}
D=$WORK/run_remote
mkdir -p "$D/out" && chmod 700 "$D"
(cd "$D" && "$HL" run -q -o "$D/file.hl" -- "$PROGS/reach_list" >"$D/native.out" 2>/dev/null)
want=$(summary_of "$D/file.hl")
for kind in unix tcp; do
    spec="unix:$D/c.sock"
    [ $kind = tcp ] && spec=tcp:127.0.0.1:0
    rm -f "$D"/out/*
    if start_server "run_$kind" --listen "$spec" -o "$D/out" --count 1; then
        (cd "$D" && timeout -k 5 "$TIMEOUT" "$HL" run -o "$D/local.hl" --remote "$ADDR" -- "$PROGS/reach_list" >"$D/out.txt" 2>"$D/err.txt")
        st=$?
        wait "$SRV"
        t=$(ls "$D"/out/heaplens.reach_list.*.hl 2>/dev/null | head -1)
        if [ "$st" = 0 ] && cmp -s "$D/out.txt" "$D/native.out" && [ ! -e "$D/local.hl" ] &&
            [ -n "$t" ] && [ "$(summary_of "$t")" = "$want" ]; then
            pass "run --remote over $kind: the collector's trace reports as the file trace ($want)"
        else
            fail "run --remote over $kind" "status $st, trace '$t': '$(summary_of "$t")' vs '$want'; $(head -c 300 "$D/err.txt")"
        fi
        grep -q "the trace went to the collector $ADDR" "$D/err.txt" &&
            pass "run --remote over $kind: says where the trace went" ||
            fail "run --remote over $kind: where" "$(head -c 300 "$D/err.txt")"
    else
        fail "run --remote over $kind" "no collector: $(cat "$WORK/run_$kind.log.err")"
    fi
done

# With a token: the collector keeps the trace only from a target that sends it.
rm -f "$D"/out/*
printf 's3cr3t-%s\n' "$RANDOM" >"$D/token" && chmod 600 "$D/token"
if start_server run_token --listen tcp:127.0.0.1:0 -o "$D/out" --token "$D/token" --count 1 --duration 30; then
    (cd "$D" && timeout -k 5 "$TIMEOUT" "$HL" run -q --remote "$ADDR" -- "$PROGS/reach_list" >/dev/null 2>"$D/err0.txt")
    (cd "$D" && timeout -k 5 "$TIMEOUT" "$HL" run -q --remote "$ADDR" --remote-token "$D/token" -- "$PROGS/reach_list" >/dev/null 2>"$D/err1.txt")
    wait "$SRV"
    n=$(ls "$D"/out/heaplens.reach_list.*.hl* 2>/dev/null | wc -l)
    t=$(ls "$D"/out/heaplens.reach_list.*.hl 2>/dev/null | head -1)
    if [ "$n" = 1 ] && [ "$(summary_of "$t")" = "$want" ]; then
        pass "run --remote-token: the collector keeps the trace sent with its secret, not the other"
    else
        fail "run --remote-token" "$n traces kept: $(ls "$D/out")"
    fi
else
    fail "run --remote-token" "no collector"
fi

# The collector killed (SIGKILL) while a target streams to it: the target runs on unharmed,
# one line, and the rest of its trace in a local file.
rm -f "$D"/out/* "$D"/local.hl*
(cd "$D" && "$PROGS/churn_random" >"$D/native2.out" 2>/dev/null)
nst=$?
if start_server killed --listen "unix:$D/k.sock" -o "$D/out"; then
    (cd "$D" && timeout -k 5 "$TIMEOUT" "$HL" run -q -o "$D/local.hl" --remote "$ADDR" -- "$PROGS/churn_random" >"$D/out2.txt" 2>"$D/err2.txt") &
    run_pid=$!
    sleep 0.15
    pkill -KILL -P "$SRV" # the server itself; its timeout wrapper then ends on its own
    wait "$run_pid"
    st=$?
    { wait "$SRV"; } 2>/dev/null # the wrapper dies by the same signal: no shell notice of it
    if [ "$st" = "$nst" ] && cmp -s "$D/out2.txt" "$D/native2.out"; then
        pass "collector killed mid-run: the program's exit status ($st) and output as natively"
    else
        fail "collector killed mid-run" "status $st (natively $nst)"
    fi
    # Whatever the kernel had taken into the socket's buffers before the kill is lost with the
    # collector; a write that fails after it switches the rest to the local file, with one line.
    if ! grep -q "collector" "$D/err2.txt"; then
        pass "collector killed mid-run: every write had gone through (nothing to say)"
    elif [ "$(grep -c . "$D/err2.txt")" = 1 ] && grep -q "tracing to $D/local.hl" "$D/err2.txt" && [ -s "$D/local.hl" ]; then
        pass "collector killed mid-run: one line, the trace goes on in $D/local.hl"
    else
        fail "collector killed mid-run: fall-back" "$(head -c 300 "$D/err2.txt")"
    fi
else
    fail "collector killed mid-run" "no collector"
fi
(cd "$D" && "$HL" run --remote unix:/nonexistent/x --json j.json -- "$PROGS/alloc_basic" >/dev/null 2>"$D/err3.txt")
st=$?
[ "$st" = 2 ] && [ "$(wc -l <"$D/err3.txt")" = 1 ] && pass "run --remote with --json: refused in one line" ||
    fail "run --remote with --json" "status $st: $(cat "$D/err3.txt")"

# heaplens shell ADDR PID: through the collector, to a process that sends it its trace. The
# shell reads the trace the collector writes; relink.c gives known leaks.
D=$WORK/shell
mkdir -p "$D/out" "$D/p" && chmod 700 "$D"
if start_server shell --listen "unix:$D/s.sock" -o "$D/out"; then
    (cd "$D" && timeout -k 5 60 "$HL" run -q --remote "$ADDR" -- "$PROGS/relink" "$D/p" >"$D/p.out" 2>"$D/p.err"; echo $? >"$D/p.status") &
    RPID=""
    for _ in $(seq 1 250); do [ -s "$D/p/pid" ] && RPID=$(cat "$D/p/pid") && break; sleep 0.02; done
    listed=""
    for _ in $(seq 1 100); do
        listed=$("$HL" shell "$ADDR" 2>&1)
        [ "$listed" = "$RPID" ] && break
        sleep 0.02
    done
    expect "shell ADDR: lists the process sending its trace there" "$RPID" "$listed"
    printf 'status\nleaks\nleaks leak\n' | timeout 60 "$HL" shell "$ADDR" "$RPID" >"$D/sh1" 2>"$D/sh1.err"
    st=$?
    expect "shell ADDR PID: exits 0" 0 "$st"
    grep -q "^process $RPID: 1 threads, trace $D/out/\.heaplens\.remote\..*\.part (from $ADDR)" "$D/sh1" &&
        pass "shell ADDR PID: status names the trace the collector writes" ||
        fail "shell ADDR PID: status" "$(head -3 "$D/sh1") $(cat "$D/sh1.err")"
    grep -q "definitely lost: 600 bytes in 15 blocks" "$D/sh1" &&
        pass "shell ADDR PID: a live scan through the collector finds the 15 lost blocks" ||
        fail "shell ADDR PID: leaks" "$(grep -i 'lost' "$D/sh1" | head -5)"
    grep -q "at 0x[0-9a-f]*: make (tests/programs/relink.c:" "$D/sh1" &&
        pass "shell ADDR PID: stacks symbolized on the collector's host" ||
        fail "shell ADDR PID: stacks" "$(grep -m3 ' at ' "$D/sh1")"
    grep -q "^15 found lost before, 0 of them released since" "$D/sh1" &&
        pass "shell ADDR PID: leaks leak through the collector" || fail "shell ADDR PID: leaks leak" "$(grep found "$D/sh1")"
    printf 'stop\nstart\nstatus\n' | timeout 60 "$HL" shell "$ADDR" "$RPID" >"$D/sh2" 2>"$D/sh2.err"
    t1=$(sed -n 's/^stopped: the trace \(.*\) has ended$/\1/p' "$D/sh2")
    t2=$(sed -n "s/^process $RPID: 1 threads, trace \(.*\) (from .*/\1/p" "$D/sh2")
    [ -n "$t1" ] && [ -n "$t2" ] && [ "$t1" != "$t2" ] &&
        pass "shell ADDR PID: a second shell; stop then start goes on in the collector's new trace" ||
        fail "shell ADDR PID: stop/start" "$(cat "$D/sh2" "$D/sh2.err" | head -8)"
    "$HL" shell "$ADDR" 999999999 >/dev/null 2>"$D/sh3.err"
    st=$?
    [ "$st" = 1 ] && [ "$(grep -c . "$D/sh3.err")" = 1 ] &&
        grep -q "no process 999999999 sends its trace to this collector" "$D/sh3.err" &&
        pass "shell ADDR PID: an unknown PID gets one line" || fail "shell ADDR unknown PID" "status $st: $(cat "$D/sh3.err")"
    touch "$D/p/stop"
    for _ in $(seq 1 250); do [ -s "$D/p.status" ] && break; sleep 0.02; done
    [ "$(cat "$D/p.status" 2>/dev/null)" = 0 ] && [ "$(cat "$D/p.out")" = relinked ] &&
        pass "shell ADDR PID: the target's output and exit status unharmed" ||
        fail "shell ADDR PID: target" "status $(cat "$D/p.status" 2>/dev/null): $(head -c 200 "$D/p.err")"
    n=$(ls "$D/out" | grep -c '^heaplens\.relink\.')
    expect "shell ADDR PID: the collector kept both traces (before and after start)" 2 "$n"
else
    fail "shell ADDR PID" "no collector"
fi
if start_server shelltcp --listen tcp:127.0.0.1:0 -o "$D/out"; then
    "$HL" shell "$ADDR" 1 >/dev/null 2>"$D/sh4.err"
    st=$?
    [ "$st" = 1 ] && grep -q "a shell reaches targets over TCP only when the collector has a --token" "$D/sh4.err" &&
        pass "shell over TCP without the collector's token: refused" || fail "shell over TCP without token" "status $st: $(cat "$D/sh4.err")"
else
    fail "shell over TCP without token" "no collector"
fi

# Over TCP with the collector's token: the target sends it, the shell too.
printf 'k3y-%s\n' "$RANDOM$RANDOM" >"$D/tok" && chmod 600 "$D/tok"
rm -rf "$D/p" && mkdir -p "$D/p"
if start_server shelltok --listen tcp:127.0.0.1:0 --token "$D/tok" -o "$D/out"; then
    (cd "$D" && timeout -k 5 60 "$HL" run -q --remote "$ADDR" --remote-token "$D/tok" -- "$PROGS/relink" "$D/p" >"$D/p.out" 2>"$D/p.err"; echo $? >"$D/p.status") &
    RPID=""
    for _ in $(seq 1 250); do [ -s "$D/p/pid" ] && RPID=$(cat "$D/p/pid") && break; sleep 0.02; done
    for _ in $(seq 1 100); do
        [ "$("$HL" shell --token "$D/tok" "$ADDR" 2>/dev/null)" = "$RPID" ] && break
        sleep 0.02
    done
    printf 'leaks\n' | timeout 60 "$HL" shell --token "$D/tok" "$ADDR" "$RPID" >"$D/sh5" 2>"$D/sh5.err"
    grep -q "definitely lost: 600 bytes in 15 blocks" "$D/sh5" &&
        pass "shell --token ADDR PID over TCP: a live scan through the collector" ||
        fail "shell over TCP with token" "$(head -c 300 "$D/sh5.err") $(grep lost "$D/sh5")"
    "$HL" shell "$ADDR" "$RPID" >/dev/null 2>"$D/sh6.err"
    st=$?
    [ "$st" = 1 ] && [ "$(grep -c . "$D/sh6.err")" = 1 ] &&
        pass "shell ADDR PID over TCP without the token: one line, status 1" || fail "shell over TCP, no token given" "status $st: $(cat "$D/sh6.err")"
    touch "$D/p/stop"
    for _ in $(seq 1 250); do [ -s "$D/p.status" ] && break; sleep 0.02; done
else
    fail "shell over TCP with token" "no collector"
fi

finish
