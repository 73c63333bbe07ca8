#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# api.sh BUILD_DIR - the in-program API (include/heaplens.h, libheaplens-api): every function
# from C, C++ and Fortran, under heaplens and without it (then each says "not traced" and the
# program's own output is the same); from static constructors and destructors, from 8 threads
# at once, in a forked child, after the agent is loaded into the running process; marks and
# report_since, watches, thresholds (each callback exactly when due), stats against the exit
# report, pauses, ignored blocks and tags in the JSON report; and the installed tree, compiled
# against with pkg-config. One line per check, "PASS name" or "FAIL name: reason"; the last
# line is "N passed, N failed"; exit 1 when anything failed.
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HL=$BUILD/heaplens
T=$BUILD/tests/api
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-api.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=60

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }
# expect NAME WANT GOT: the lines must be equal
expect() {
    if [ "$2" == "$3" ]; then pass "$1"; else fail "$1" "$(diff <(echo "$2") <(echo "$3") | tr '\n' ' ')"; fi
}
traced() { # traced NAME PROG ARGS...: its stdout in $WORK/NAME.out, its trace $WORK/NAME.hl
    local name=$1; shift
    timeout $TIMEOUT "$HL" run -q -o "$WORK/$name.hl" --json "$WORK/$name.json" -- "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
}
# json NAME PYTHON-EXPR: the expression on the exit report (d), printed
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$WORK/$1.json"; }

for p in api_c api_cxx api_f api_threads_scan; do
    [ -x "$T/$p" ] || { fail setup "no $T/$p (make $T/$p)"; finish; }
done

# --- every function, untraced and traced: the same lines, the results apart ----------------
NOSYS=$'is_traced 0\npause -1 ENOSYS\nresume -1 ENOSYS\nmark>0 -1 ENOSYS\nreport_since -1 ENOSYS
report -1 ENOSYS\nleak_check -1 ENOSYS\nleak_check_new -1 ENOSYS\nignore -1 ENOSYS\nwatch -1 ENOSYS
tag -1 ENOSYS\nuntag -1 ENOSYS\nset_thresholds -1 ENOSYS\nstats -1 ENOSYS\nwork 124716'
expect "c untraced: every function says not traced" "$NOSYS" "$("$T/api_c" all)"
traced c_all "$T/api_c" all
LEAK="leak_check 0"
LEAKNEW="leak_check_new 0"
expect "c traced: every function works" $'is_traced 1\npause 0\nresume 0\nmark>0 0\nreport_since 0
report 0\n'"$LEAK"$'\n'"$LEAKNEW"$'\nignore 0\nwatch 0\nwatch all FREED same=1 where=main tid_main=1
tag 0\nuntag 0\nset_thresholds 0\nstats 0\nwork 124716' "$(cat "$WORK/c_all.out")"

CXX_OUT=$("$T/api_cxx")
expect "c++ untraced: not traced, the same work" $'static ctor is_traced 0\nstatic ctor mark>0 -1
is_traced 0\npause -1\nresume -1\nreport_since -1\nreport -1\nleak_check -1\nleak_check_new -1
ignore -1\nwatch -1\ntag -1\nuntag -1\nset_thresholds -1\nstats -1\ncallbacks watch 0 threshold 0
work 1100' "$(grep -v '^static dtor' <<<"$CXX_OUT")"
expect "c++ untraced: static destructor" "static dtor stats -1" "$(grep '^static dtor' <<<"$CXX_OUT")"
traced cxx "$T/api_cxx"
L=${LEAK%% ENOSYS}
expect "c++ traced: every function works, from a static constructor and destructor" \
    $'static ctor is_traced 1\nstatic ctor mark>0 0\nis_traced 1\npause 0\nresume 0\nreport_since 0
report 0\n'"$L"$'\n'"${L/leak_check/leak_check_new}"$'\nignore 0\nwatch 0\ntag 0\nuntag 0
set_thresholds 0\nstats 0\ncallbacks watch 1 threshold 1\nwork 1100\nstatic dtor stats 0' \
    "$(grep -v '^static dtor' "$WORK/cxx.out"; grep '^static dtor' "$WORK/cxx.out")"

F_OUT=$("$T/api_f")
expect "fortran untraced: not traced, the same work" $'is_traced 0\npause -1\nresume -1\nmark>0 F
report_since -1\nreport -1\nleak_check -1\nleak_check_new -1\nignore -1\nwatch -1\ntag -1\nuntag -1
set_thresholds -1\nstats -1\nstats live>=8000 F\ncallbacks watch 0 threshold 0\nwork   251000.0' "$F_OUT"
traced fortran "$T/api_f"
expect "fortran traced: every function works" $'is_traced 1\npause 0\nresume 0\nmark>0 T
report_since 0\nreport 0\n'"$L"$'\n'"${L/leak_check/leak_check_new}"$'\nignore 0\nwatch 0\nwatch event 1
tag 0\nuntag 0\nset_thresholds 0\nthreshold 1 bytes 1000000\nstats 0\nstats live>=8000 T
callbacks watch 1 threshold 1\nwork   251000.0' "$(grep -v '^==heaplens==' "$WORK/fortran.out")"
grep -q '^==heaplens== 8000 bytes in 1 blocks allocated' "$WORK/fortran.out" &&
    pass "fortran: report_since shows the array allocated after the mark" ||
    fail "fortran: report_since" "no 8000-byte block in $(head -3 "$WORK/fortran.out")"

# --- static constructors and destructors ----------------------------------------------------
# (the destructor writes without stdio, before exit flushes stdout)
OUT=$(API_CTOR=1 "$T/api_c" all | grep -E '^(ctor|dtor)' | sort)
expect "c untraced: from a constructor and a destructor" $'ctor is_traced 0 mark>0 0
dtor stats -1 live>=4321 0' "$OUT"
API_CTOR=1 traced ctor "$T/api_c" all
expect "c traced: from a constructor and a destructor" $'ctor is_traced 1 mark>0 1
dtor stats 0 live>=4321 1' "$(grep -E '^(ctor|dtor)' "$WORK/ctor.out" | sort)"
grep -q '^==heaplens== 4321 bytes in 1 blocks allocated' "$WORK/ctor.out" &&
    pass "c traced: a destructor's report_since(the constructor's mark)" ||
    fail "destructor report" "$(grep heaplens "$WORK/ctor.out" | head -3)"

# --- mark and report_since ------------------------------------------------------------------
traced since "$T/api_c" since
python3 - "$WORK/since.out" <<'PY' && pass "report_since: only what is live from after the mark, by stack; marks expire; rebases keep old blocks old" || fail report_since "$(head -c 600 "$WORK/since.out")"
import json, sys
text = open(sys.argv[1]).read()
docs, rest, dec = [], text, json.JSONDecoder()
while "{" in rest:
    rest = rest[rest.index("{"):]
    d, end = dec.raw_decode(rest)
    docs.append(d)
    rest = rest[end:]
first, last = docs
fns = lambda s: [f["function"] for f in s["stack"]]
assert first["live"]["bytes"] == 100 + 2222 + 3333 and first["live"]["blocks"] == 3, first["live"]
assert sorted(s["bytes"] for s in first["sites"]) == [100, 2222, 3333]
assert all("alloc_after_mark" in fns(s) for s in first["sites"])
assert last["live"]["bytes"] == 5555 and last["live"]["blocks"] == 1, last["live"]
assert "stale -1 ESTALE" in text and "report_since_last 0" in text
assert "==heaplens== 1111 bytes in 1 blocks allocated" in text  # report: every live block
# The freed block is in no text report (not a bare "4444": an address may hold those digits).
assert "4444 bytes" not in text and "4,444 bytes" not in text
PY

# --- watch ----------------------------------------------------------------------------------
traced watch "$T/api_c" watch
expect "watch: called on free and on realloc, with where, on the program's thread" $'watch 0
watch free FREED same=1 where=release_watched tid_main=1\nwatch 0
watch realloc RESIZED same=1 where=resize_watched tid_main=1\nwatch 0\nunwatch 0
watch_not_a_block -1 ENOENT' "$(cat "$WORK/watch.out")"

# --- thresholds -----------------------------------------------------------------------------
traced thresholds "$T/api_c" thresholds
expect "thresholds: a block, growth within a window, a window passed; each exactly when due" $'start
set 0\nthreshold BLOCK 1048576 at step 2 main_thread=1\nthreshold DELTA 4194304 at step 12 main_thread=1
set 0\nthreshold DELTA 4194304 at step 22 main_thread=1\noff 0' "$(cat "$WORK/thresholds.out")"

# --- stats against the exit report ----------------------------------------------------------
# The program's last figures are from before its exit, the report's after glibc's exit-time
# releases (stdout's buffer: libc_exit.c); without those the two are the same.
HEAPLENS_LIBC_FREERES=0 traced stats "$T/api_c" stats
read -r _ rc _ live _ blocks _ peak _ peakb _ allocs _ frees _ bytes _ ptime <<<"$(grep '^final' "$WORK/stats.out")"
REPORT=$(json stats '" ".join(str(d["totals"][k]) for k in ("in_use_bytes","in_use_blocks","peak_heap_bytes","peak_heap_blocks","allocations","frees","bytes_allocated","peak_time_ns"))')
read -r rlive rblocks rpeak rpeakb rallocs rfrees rbytes rtime <<<"$REPORT"
expect "stats: agree with the exit report" "0 $rlive $rblocks $rpeak $rpeakb $rallocs $rfrees $rbytes" \
    "$rc $live $blocks $peak $peakb $allocs $frees $bytes"
# The trace places events to within HL_TIME_STEP_US (2 ms) of their time.
[ "${ptime:-0}" -gt 0 ] && [ $((ptime - rtime < 0 ? rtime - ptime : ptime - rtime)) -le 2100000 ] &&
    pass "stats: the peak's time as the report's, within the trace's 2 ms" ||
    fail "stats peak time" "$ptime against $rtime"
expect "stats: this thread's counts" "stats 0 live_bytes 9096 live_blocks 6 peak_bytes 14096 allocations 11 frees 5 thread_allocations 11 thread_frees 5" \
    "$(grep '^stats' "$WORK/stats.out")"

# --- tags, pause, ignore in the exit report -------------------------------------------------
traced tags "$T/api_c" tags
expect "tags: allocations by tag in the JSON report" "[(7, 42, 4, 1300), (8, 1, 2, 20)]" \
    "$(json tags 'sorted((t["type"], t["location"], t["allocations"], t["bytes_allocated"]) for t in d["api"]["tags"])')"
expect "tags: allocations by tag in the text report" $'==heaplens==     tag 7/42: 4 allocs, 1,300 bytes allocated
==heaplens==     tag 8/1: 2 allocs, 20 bytes allocated' "$("$HL" report "$WORK/tags.hl" 2>&1 | grep ' tag ' | sort)"
traced pause "$T/api_c" pause
expect "pause: what a paused thread allocates is not recorded, its release is no error; the trace says so" \
    $'pause 0\nresume 0\nresume_unpaused -1 EINVAL\n7002 1 0 1' \
    "$(cat "$WORK/pause.out"; json pause 'd["leaks"]["definitely_lost"]["bytes"], d["leaks"]["definitely_lost"]["blocks"], len(d["errors"]), d["api"]["pauses"]' | tr -d '(),')"
traced ignore "$T/api_c" ignore
expect "ignore: an ignored block is never reported (small and header blocks); one released is forgotten" \
    $'ignore 0\nignore 0\nignore_not_a_block -1 ENOENT\n154 2 0 3' \
    "$(cat "$WORK/ignore.out"; json ignore 'd["leaks"]["definitely_lost"]["bytes"], d["leaks"]["definitely_lost"]["blocks"], d["leaks"]["unscanned"]["blocks"], d["api"]["ignores"]' | tr -d '(),')"

# Without a scan every live block is "unscanned" but the ignored ones; the block released after
# its ignore is forgotten, so its site's next block (which leaks) is still counted. stdout's
# buffer is not among them: glibc releases it at exit (__libc_freeres).
timeout $TIMEOUT "$HL" run -q --no-scan -o "$WORK/noscan.hl" --json "$WORK/noscan.json" -- "$T/api_c" ignore >/dev/null 2>&1
expect "ignore without a scan: ignored blocks are left out of what is still allocated" "154 2" \
    "$(json noscan 'd["leaks"]["unscanned"]["bytes"], d["leaks"]["unscanned"]["blocks"]' | tr -d '(),')"

# --- 8 threads, a forked child, a later attach ----------------------------------------------
traced threads "$T/api_c" threads
expect "8 threads at once, every function" "threads ok 16000 of 16000" "$(cat "$WORK/threads.out")"
traced fork "$T/api_c" fork
OUT=$(grep -v '^ \|^{' "$WORK/fork.out")
# the child's allocations: its block and stdout's buffer (the parent had printed nothing)
expect "fork: the child's own marks, report and stats" $'child is_traced 1\nchild report_since 0
child stats 0 live_bytes>=14364 1 allocations 2\nparent is_traced 1' "$OUT"
OUT=""
for f in "$WORK"/fork.hl*; do
    "$HL" report --json "$WORK/f.json" "$f" >/dev/null 2>&1
    OUT+=$(python3 -c "import json; d=json.load(open('$WORK/f.json')); print(d['process']['fork_child'], d['api']['ignores'], sum(r['bytes'] == 4242 for r in d['leak_records']), d['leaks']['unscanned']['blocks'])")$'\n'
done
expect "fork: a block ignored before the fork is ignored in both traces" $'False 1 0 0\nTrue 1 0 0' "$(sort <<<"${OUT%$'\n'}")"
grep -q '"bytes": 8888, "blocks": 1, "stack"' "$WORK/fork.out" &&
    pass "fork: the child's report_since names its block" || fail "fork report" "$(head -c 300 "$WORK/fork.out")"
OUT=$(timeout $TIMEOUT "$HL" run -q --no-follow -o "$WORK/nofollow.hl" -- "$T/api_c" fork 2>/dev/null | grep -v '^ \|^{')
expect "fork under --no-follow: the untraced child is told so" $'child is_traced 0
child report_since -1 ENOSYS\nchild stats -1 live_bytes>=14364 0 allocations 0\nparent is_traced 1' "$OUT"
OUT=$(cd "$WORK" && API_AGENT=$BUILD/libheaplens.so HEAPLENS_OPTIONS=output=$WORK/attach.hl timeout $TIMEOUT "$T/api_c" attach 2>/dev/null)
expect "attach: found once the agent is loaded into the running process" $'before is_traced 0
before mark -1 ENOSYS\nloaded 1\nafter is_traced 1\nafter mark>0 0\nafter report_since 0' \
    "$(grep -v '^ \|^{' <<<"$OUT")"

# --- the installed tree, compiled against with pkg-config -----------------------------------
PREFIX=$WORK/prefix
if make -s -C "$ROOT" install BUILD="$BUILD" PREFIX="$PREFIX" >"$WORK/install.log" 2>&1; then
    export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
    FLAGS=$(pkg-config --cflags --libs heaplens)
    if gcc -o "$WORK/example" "$ROOT/examples/api_example.c" $FLAGS -Wl,-rpath,"$PREFIX/lib" 2>"$WORK/cc.log"; then
        pass "install: an example compiles against the installed tree with pkg-config ($FLAGS)"
        U=$("$WORK/example"); TR=$("$PREFIX/bin/heaplens" run -q -o "$WORK/ex.hl" -- "$WORK/example" 2>/dev/null)
        grep -q '^traced 0' <<<"$U" && grep -q '^traced 1' <<<"$TR" &&
            [ "$(grep '^result' <<<"$U")" == "$(grep '^result' <<<"$TR")" ] &&
            grep -q 'bytes in' <<<"$TR" &&
            pass "install: the example runs untraced, and traced by the installed heaplens" ||
            fail "installed example" "$(echo "$U" "$TR" | head -c 400)"
    else
        fail "install: compile with pkg-config" "$(head -c 400 "$WORK/cc.log")"
    fi
    [ -f "$PREFIX/include/heaplens.h" ] && [ -f "$PREFIX/include/heaplens.f90" ] &&
        [ -f "$PREFIX/lib/libheaplens-api.a" ] && [ -f "$PREFIX/lib/libheaplens-api.so" ] &&
        [ -x "$PREFIX/bin/heaplens" ] && [ -f "$PREFIX/lib/heaplens/libheaplens.so" ] &&
        pass "install: header, Fortran module, libraries, agent and CLI" ||
        fail "install: files" "$(cd "$PREFIX" && find . -type f | tr '\n' ' ')"
else
    fail "make install" "$(tail -3 "$WORK/install.log")"
fi
traced ignore_root "$T/api_c" ignore_root
expect "ignore: an ignored block is a root (the block only it points to is still reachable)" "0 66 1" \
    "$(json ignore_root '"%d %d %d" % (d["leaks"]["definitely_lost"]["bytes"], sum(r["bytes"] for r in d["leak_records"] if r["kind"] == "still_reachable" and r["bytes"] == 66), d["api"]["ignores"])')"

# --- leak checks mid-run agree with the exit scan; leak_check_new lists only the later leaks ----
expect "leak checks untraced: not traced" $'check1 -1 d=0/0 i=0/0 p=0/0\ncheck2 -1 d=0/0 i=0/0 p=0/0\nnew -1 d=0/0 i=0/0 p=0/0' \
    "$("$T/api_c" leaks)"
traced leaks "$T/api_c" leaks
expect "leak checks: every kind mid-run, after a change, and only the new ones" \
    $'check1 0 d=132/2 i=48/1 p=0/0\ncheck2 0 d=432/3 i=48/1 p=0/0\nnew 0 d=200/1 i=0/0 p=0/0' \
    "$(cat "$WORK/leaks.out")"
expect "leak checks: the exit scan of the same state (check2 and the new one)" "632/4 48/1" \
    "$(json leaks "'%d/%d %d/%d' % (d['leaks']['definitely_lost']['bytes'], d['leaks']['definitely_lost']['blocks'], d['leaks']['indirectly_lost']['bytes'], d['leaks']['indirectly_lost']['blocks'])")"
if command -v valgrind >/dev/null 2>&1; then
    valgrind --leak-check=full "$T/api_c" leaks >/dev/null 2>"$WORK/leaks.vg"
    vg=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes in \([0-9,]*\) blocks.*/\1\/\2/p' "$WORK/leaks.vg" | tr -d ,)
    expect "leak checks: memcheck finds the same definitely lost at exit" "632/4" "$vg"
fi

# Stops of the world while threads start and end without pause: a thread asked to park while it
# held the agent's thread registry (making its state, or ending) parks once it lets go, and every
# scan comes back (it hung the program, the stop's handler waiting for the lock its own thread
# held).
if traced threads_scan "$T/api_threads_scan" 1500; then
    expect "leak checks while threads start and end: every scan comes back" "scans 1500 of 1500" "$(cat "$WORK/threads_scan.out")"
else
    fail "leak checks while threads start and end: every scan comes back" "status $? (124: it hung) $(head -c 300 "$WORK/threads_scan.err")"
fi

finish
