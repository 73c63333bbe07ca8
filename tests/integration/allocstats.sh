#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# allocstats.sh BUILD_DIR - heaplens run --allocator-stats: the allocator's own figures (glibc's
# mallinfo2 and malloc_info) and the process's (VmRSS...) sampled into the trace at the period
# and once at the end, beside the traced live heap: glibc's "in use" within its overhead of the
# live heap, RSS at least the live heap, the memory glibc keeps once the program released it,
# "RSS - live heap" at the peak in report --timeline, the JSON report and the page; under
# jemalloc, tcmalloc and mimalloc the figures they do not have are "not available", never zeros;
# the program's output and exit status as without heaplens. One line per check, "PASS name" or
# "FAIL name: reason"; the last line is "N passed, N failed"; exit 1 when anything failed.
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
P=$BUILD/programs/alloc_stats
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-allocstats.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=60
HOLD=200   # ms the program holds its peak, and then the memory glibc keeps
PERIOD=20  # --allocator-stats=PERIOD

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }
# ok NAME DETAIL COMMAND...: PASS when the command succeeds
ok() { local name=$1 detail=$2; shift 2; if "$@"; then pass "$name"; else fail "$name" "$detail"; fi; }
# js NAME JSON EXPR: a Python expression on the JSON report must hold. In scope: d (the report),
# S (its allocator_stats), X (S's samples), pk (S's at_peak); the value of EXPR's first
# failing part is printed.
js() {
    local name=$1 json=$2 expr=$3 out
    out=$(python3 - "$json" "$expr" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
S = d.get("allocator_stats") or {}
X = S.get("samples", [])
pk = S.get("at_peak", {})
ALLOC = ["arena", "in_use", "free", "fast_free", "mmapped", "mmap_count", "keepcost"]
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None
gaps = [b["time_ns"] - a["time_ns"] for a, b in zip(X, X[1:])]
ok = eval(sys.argv[2])
if not ok:
    print("records %s, peak %s" % (S.get("records"), {k: pk.get(k) for k in ("time_ns", "heap_bytes", "in_use", "free", "vm_rss", "arenas")}))
    sys.exit(1)
EOF
)
    if [ $? -eq 0 ]; then pass "$name"; else fail "$name" "$expr: $out"; fi
}

[ -x "$P" ] || { fail setup "no $P (make $P)"; finish; }
[ -x "$HL" ] || { fail setup "no $HL"; finish; }

# --- glibc: figures at the period, beside the live heap ------------------------------------
NATIVE_OUT=$("$P" $HOLD); NATIVE_ST=$?
timeout $TIMEOUT "$HL" run -q --allocator-stats=$PERIOD -o "$WORK/g.hl" --json "$WORK/g.json" -- \
    "$P" $HOLD >"$WORK/g.out" 2>"$WORK/g.err"
ST=$?
ok "glibc: exit status as without heaplens ($NATIVE_ST)" "status $ST; $(head -3 "$WORK/g.err")" [ $ST -eq $NATIVE_ST ]
ok "glibc: output as without heaplens" "got '$(cat "$WORK/g.out")', want '$NATIVE_OUT'" [ "$(cat "$WORK/g.out")" = "$NATIVE_OUT" ]
ok "glibc: nothing on stderr with -q" "$(head -3 "$WORK/g.err")" [ ! -s "$WORK/g.err" ]
J=$WORK/g.json
js "glibc: the JSON report parses and has allocator_stats from mallinfo2" "$J" \
    "S['source'] == 'glibc mallinfo2' and S['records'] == len(X) and all(S['available'].values())"
# The program runs 2 x HOLD ms and more: a sample every PERIOD ms (writer passes may come late
# on a loaded machine: the median gap, and half the expected count at least).
js "glibc: samples at the period ($PERIOD ms)" "$J" \
    "S['records'] >= (2 * $HOLD // $PERIOD) // 2 and 0.75 * $PERIOD * 1e6 <= median(gaps) <= 2 * $PERIOD * 1e6"
js "glibc: the last sample at the trace's end" "$J" \
    "0 <= d['end']['time_ns'] - S['at_end']['time_ns'] < $PERIOD * 1e6"
js "glibc: the peak sample holds the traced peak (16,384 x 1000 bytes)" "$J" \
    "pk['heap_bytes'] == d['totals']['peak_heap_bytes'] >= 16384 * 1000"
# glibc's in-use counts the live blocks with their chunk headers, rounding and heaplens's own
# guard and header: above the live heap, by at most 10% and 256 KiB (the agent's and libc's own).
# In every sample where the heap stood still since the one before (the record's live heap is the
# trace's as of the writer's last pass, a moment before mallinfo2: a sample inside the fill or
# release loop compares two moments), and at the peak.
js "glibc: in use (mallinfo2) tracks the live heap within allocator overhead" "$J" \
    "sum(1 for a, x in zip(X, X[1:]) if a['heap_bytes'] == x['heap_bytes']) >= 4 and all(x['heap_bytes'] <= x['in_use'] <= 1.10 * x['heap_bytes'] + 262144 for a, x in zip([pk] + X, [pk] + X[1:]) if a['heap_bytes'] == x['heap_bytes'])"
js "glibc: VmRSS non-zero and at least the live heap, in every sample" "$J" \
    "all(x['vm_rss'] > 0 and x['vm_rss'] >= x['heap_bytes'] and x['vm_hwm'] >= x['vm_rss'] for x in X)"
js "glibc: RssAnon at least the live heap at the peak" "$J" "pk['rss_anon'] >= pk['heap_bytes']"
# After the release of all but the top block, glibc keeps the 16 MB below it as free chunks
js "glibc: the memory glibc keeps after the release shows as free, not live" "$J" \
    "any(x['heap_bytes'] < 1 << 20 and x['free'] >= 0.9 * 16384 * 1000 and x['vm_rss'] >= 16384 * 1000 for x in X)"
js "glibc: malloc_info's arenas add up to mallinfo2's arena at the peak" "$J" \
    "pk['arenas'] >= 1 and len(pk['arena_list']) == pk['arenas'] and sum(a['system'] for a in pk['arena_list']) == pk['arena']"
js "glibc: rss_minus_heap at the peak is VmRSS less the live heap" "$J" \
    "pk['rss_minus_heap'] == pk['vm_rss'] - pk['heap_bytes'] > 0"

# report --timeline: the table and the line at the peak, its numbers consistent
"$HL" report --timeline "$WORK/g.hl" >"$WORK/g.tl" 2>"$WORK/g.tl.err"
ok "report --timeline: the allocator table beside the live heap" "$(head -3 "$WORK/g.tl.err")" \
    grep -q '^ALLOCATOR AND PROCESS MEMORY (--allocator-stats: [0-9]* samples; glibc mallinfo2' "$WORK/g.tl"
PEAK_LINE=$(grep "at the heap's peak" "$WORK/g.tl")
ok "report --timeline: RSS - live heap at the peak, in bytes and % of RSS" "got '$PEAK_LINE'" \
    python3 -c '
import re, sys
m = re.search(r"RSS ([\d,]+) - live heap ([\d,]+) = ([\d,]+) bytes \(([\d.]+)% of RSS\)", sys.argv[1])
n = lambda s: int(s.replace(",", ""))
rss, heap, beyond, pct = n(m[1]), n(m[2]), n(m[3]), float(m[4])
sys.exit(not (heap >= 16384 * 1000 and beyond == rss - heap and abs(pct - 100.0 * beyond / rss) < 0.1))
' "$PEAK_LINE"
ok "report --timeline: the allocator's in use and free at the peak" "$(grep -A1 "at the heap's peak" "$WORK/g.tl")" \
    bash -c "grep -A1 \"at the heap's peak\" '$WORK/g.tl' | grep -q 'the allocator: [0-9,]* in use (.*), [0-9,]* free in its bins'"

# heaplens html validates the JSON (json_check) and draws the page from it; report --html too
ok "heaplens html takes the JSON report (its JSON check passes)" "$("$HL" html "$J" -o "$WORK/h1.html" 2>&1 | head -2)" \
    "$HL" html "$J" -o "$WORK/h1.html"
"$HL" report -q --html "$WORK/g.html" "$WORK/g.hl" 2>"$WORK/html.err"
ok "report --html: the page carries the allocator chart and its data" "$(head -2 "$WORK/html.err")" \
    bash -c "grep -q 'id=\"s-alloc-stats\"' '$WORK/g.html' && grep -q 'allocator_stats' '$WORK/g.html' && grep -q 'id=\"s-alloc-stats\"' '$WORK/h1.html'"

# --- once at the end: a period longer than the run gives the first sample and the last ------
timeout $TIMEOUT "$HL" run -q --allocator-stats=3600000 -o "$WORK/e.hl" --json "$WORK/e.json" -- "$P" 20 >/dev/null 2>&1
js "one sample at the start and one at the end when the period is longer than the run" "$WORK/e.json" \
    "S['records'] == 2 and d['end']['time_ns'] - S['at_end']['time_ns'] < 20e6 and S['at_end']['heap_bytes'] < 1 << 20"

# --- off by default; on by hand through HEAPLENS_OPTIONS --------------------------------------
timeout $TIMEOUT "$HL" run -q -o "$WORK/n.hl" --json "$WORK/n.json" -- "$P" 20 >/dev/null 2>&1
js "without --allocator-stats: allocator_stats is null" "$WORK/n.json" "d['allocator_stats'] is None"
"$HL" report --timeline "$WORK/n.hl" >"$WORK/n.tl" 2>/dev/null
ok "without --allocator-stats: no allocator table in --timeline" "" bash -c "! grep -q ALLOCATOR '$WORK/n.tl' && grep -q 'HEAP OVER TIME' '$WORK/n.tl'"
OUT=$(LD_PRELOAD=$BUILD/libheaplens.so HEAPLENS_OPTIONS="allocator_stats=$PERIOD:output=$WORK/o.hl" "$P" 100 2>"$WORK/o.err"); ST=$?
"$HL" report -q --json "$WORK/o.json" "$WORK/o.hl" 2>/dev/null
ok "HEAPLENS_OPTIONS=allocator_stats=$PERIOD: the program as without heaplens" "status $ST, '$OUT'" [ $ST -eq $NATIVE_ST -a "$OUT" = "$NATIVE_OUT" ]
js "HEAPLENS_OPTIONS=allocator_stats=$PERIOD: samples in the trace" "$WORK/o.json" "S['records'] >= 4 and S['source'] == 'glibc mallinfo2'"

# --- the program's descriptors: the same as under plain heaplens run (the agent's own, no more) --
# fds heaplens options...: the descriptors a shell has after a few samples, without numbers of
# pipes and sockets. Listed twice, 50 ms apart, and only what both show: a sample reads /proc
# through a descriptor open for a moment, which a listing may catch (as a name it can no longer
# look at, or open still); a descriptor left open is in both.
fd_names() { awk 'NR > 1 && $1 !~ /\?/ {print $9, $10, $11}' "$1" | sed 's/\[[0-9]*\]//' | sort; }
fds() {
    rm -f "$WORK"/fd.a "$WORK"/fd.b
    timeout $TIMEOUT "$HL" run -q "$@" -o "$WORK/fd.hl" -- \
        sh -c 'sleep 0.1; ls -l /proc/$$/fd >"$1"; sleep 0.05; ls -l /proc/$$/fd >"$2"' sh \
        "$WORK/fd.a" "$WORK/fd.b" >/dev/null 2>&1
    comm -12 <(fd_names "$WORK/fd.a") <(fd_names "$WORK/fd.b")
    rm -f "$WORK"/fd*.hl
}
PLAIN_FDS=$(fds) STATS_FDS=$(fds --allocator-stats=1)
ok "descriptors as under plain heaplens run (no descriptor left open by the sampling)" \
    "$(diff <(echo "$PLAIN_FDS") <(echo "$STATS_FDS") | tr '\n' ' ')" [ -n "$PLAIN_FDS" -a "$PLAIN_FDS" = "$STATS_FDS" ]

# --- threads: one arena each, a forked child's own samples -----------------------------------
OUT=$(timeout $TIMEOUT "$HL" run -q --allocator-stats=1 -o "$WORK/t.hl" --json "$WORK/t.json" -- "$BUILD/programs/threads_alloc" 2>"$WORK/t.err"); ST=$?
ok "threads: the program's output and status as without heaplens" "status $ST, '$OUT'" [ $ST -eq 0 -a "$OUT" = "$("$BUILD/programs/threads_alloc")" ]
js "threads: malloc_info lists the threads' arenas" "$WORK/t.json" \
    "S['at_end']['arenas'] >= 2 and len(S['at_end']['arena_list']) == S['at_end']['arenas']"
rm -f "$WORK"/f.*.hl
timeout $TIMEOUT "$HL" run -q --allocator-stats=5 -o "$WORK/f.%p.hl" -- "$BUILD/programs/fork_child" >/dev/null 2>&1
n=0; good=0
for t in "$WORK"/f.*.hl; do
    [ -e "$t" ] || continue
    n=$((n + 1))
    "$HL" report -q --json "$t.json" "$t" 2>/dev/null
    python3 -c 'import json,sys; S=json.load(open(sys.argv[1]))["allocator_stats"]; sys.exit(not (S and S["records"] >= 1 and S["source"] == "glibc mallinfo2"))' "$t.json" && good=$((good + 1))
done
ok "fork: the parent's trace and the child's each have their samples" "$good of $n traces" [ $n -eq 2 -a $good -eq 2 ]

# --- another allocator underneath: what it does not say is not available --------------------
for lib in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
    path=/usr/lib/x86_64-linux-gnu/$lib
    if [ ! -e "$path" ]; then
        skip "under $lib" "$path not installed"
        continue
    fi
    OUT=$(LD_PRELOAD=$path timeout $TIMEOUT "$HL" run -q --allocator-stats=$PERIOD -o "$WORK/$lib.hl" --json "$WORK/$lib.json" -- "$P" 100 2>"$WORK/$lib.err"); ST=$?
    ok "under $lib: output and exit status as without heaplens" "status $ST, '$OUT'; $(head -2 "$WORK/$lib.err")" \
        [ $ST -eq $NATIVE_ST -a "$OUT" = "$NATIVE_OUT" ]
    if [ $lib = libtcmalloc_minimal.so.4 ]; then
        # tcmalloc's own mallinfo: arena, in use and free; the rest not available
        js "under $lib: its mallinfo's in use tracks the live heap, the rest not available" "$WORK/$lib.json" \
            "S['source'] == \"the allocator's mallinfo\" and pk['in_use'] >= pk['heap_bytes'] > 1e6 and all(x[k] is None and not S['available'][k] for x in X for k in ALLOC if k not in ('arena', 'in_use', 'free'))"
    else
        js "under $lib: glibc's figures not available (null), never zeros" "$WORK/$lib.json" \
            "S['source'] == 'none' and all(x[k] is None for x in X for k in ALLOC) and not any(S['available'][k] for k in ALLOC) and pk['arena_list'] == []"
        "$HL" report --timeline "$WORK/$lib.hl" >"$WORK/$lib.tl" 2>/dev/null
        ok "under $lib: --timeline says which figures are not available" "$(grep -i 'not available' "$WORK/$lib.tl")" \
            grep -q 'not available from the allocator underneath (it is not glibc.s malloc and has no mallinfo): arena in_use free' "$WORK/$lib.tl"
    fi
    js "under $lib: VmRSS still sampled, at least the live heap" "$WORK/$lib.json" \
        "S['available']['vm_rss'] and all(x['vm_rss'] >= x['heap_bytes'] for x in X) and S['records'] >= 4"
done

finish
