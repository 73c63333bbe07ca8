#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dropin.sh BUILD_DIR - heaplens memcheck where Valgrind's memcheck was: its XML (protocol 4)
# against memcheck's own on the acceptance programs and some of tests/programs (one reader,
# vgxml.py, for both), its text and options, Valgrind-format suppressions, and a CMake project's
# `ctest -T memcheck` with heaplens as MEMORYCHECK_COMMAND against the same with valgrind.
# One line per check: "PASS name", "FAIL name: reason" or "SKIP name: why"; the last line is
# "N passed, N failed"; exit status 1 when anything failed. Comparisons with memcheck are skipped
# where valgrind is not installed, the CMake checks where cmake is not.
set -u

BUILD=$(cd "${1:-build}" && pwd) || { echo "dropin.sh: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
HLM=$BUILD/heaplens-memcheck
PROGS=$BUILD/programs
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VGXML=$HERE/vgxml.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-dropin.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=120 # seconds per command: memcheck takes a few on the largest program
ulimit -c 0 2>/dev/null

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }
HAVE_VG=0
command -v valgrind >/dev/null 2>&1 && HAVE_VG=1

# memcheck's options for the comparisons. Both tools are told not to run glibc's and libstdc++'s
# exit-time cleanup, so that the blocks those would free stay in both and are compared too;
# defaults_compare (below) compares with the cleanup, as both run by default.
MC_OPTS=(-q --leak-check=full --show-leak-kinds=all --num-callers=30)
VG_ONLY=(--run-libc-freeres=no --run-cxx-freeres=no)

# --- 1. XML against memcheck's ------------------------------------------------------------------
ACC=$ROOT/../shared/acceptance
CASES=()
if [ -f "$ACC/Makefile" ]; then
    if make -s -C "$ACC" BUILD="$WORK/acc" all >"$WORK/acc-build.log" 2>&1; then
        for p in "$WORK"/acc/c*; do
            # memcheck 3.19 cannot run pvalloc (the acceptance README says so).
            [ -x "$p" ] && [ "$(basename "$p")" != c28_pvalloc ] && CASES+=("$p")
        done
    else
        fail acceptance-build "$(tail -3 "$WORK/acc-build.log" | tr '\n' ' ')"
    fi
else
    skip acceptance "../shared/acceptance not present: tests/programs only"
fi
# err_overflow is checked apart below: memcheck sees the write, heaplens the guard bytes after.
for p in dropin_mixed err_double_free err_mismatch err_free_interior err_free_stack \
    err_realloc_freed reach_list reach_cycle reach_interior reach_global cxx_new_delete; do
    CASES+=("$PROGS/$p")
done

# xml_of PREFIX: the file of the process the others descend from, of PREFIX.*.xml
xml_of() { python3 "$VGXML" root "$1".*.xml 2>/dev/null; }

for p in "${CASES[@]}"; do
    c=$(basename "$p")
    d=$WORK/xml/$c
    mkdir -p "$d"
    (cd "$d" && timeout -k 5 $TIMEOUT "$HL" memcheck "${MC_OPTS[@]}" "${VG_ONLY[@]}" --xml=yes \
        --xml-file="$d/hl.%p.xml" "$p" >/dev/null 2>"$d/hl.err" </dev/null)
    hx=$(xml_of "$d/hl")
    if [ -z "$hx" ]; then
        fail "xml-$c" "heaplens wrote no readable XML ($(head -c 300 "$d/hl.err"))"
        continue
    fi
    if [ $HAVE_VG = 0 ]; then
        python3 "$VGXML" summary "$hx" >/dev/null && pass "xml-$c parses" || fail "xml-$c" "unreadable"
        continue
    fi
    (cd "$d" && timeout -k 5 $TIMEOUT valgrind "${MC_OPTS[@]}" "${VG_ONLY[@]}" --xml=yes \
        --xml-file="$d/vg.%p.xml" "$p" >/dev/null 2>&1 </dev/null)
    vx=$(xml_of "$d/vg")
    if [ -z "$vx" ]; then
        fail "xml-$c" "memcheck wrote no readable XML"
        continue
    fi
    out=$(python3 "$VGXML" compare "xml-$c" "$vx" "$hx" 2>&1)
    echo "$out"
    PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
    FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
done
[ $HAVE_VG = 0 ] && skip xml-vs-memcheck "valgrind is not installed"

# With memcheck's defaults, glibc and libstdc++ release what they keep at exit before the leak
# check (libc_exit.h): the TLS vectors of cached thread stacks (threads_ended: two joined threads
# and one not, whose vector is possibly lost in both), the buffers of open streams (stdio_exit:
# stdout's and an open file's; its FILEs still reachable in both), a locale, NSS, the time zone,
# iconv and the loader's lists (libc_own), and libstdc++'s exception pool (cxx_new_delete).
defaults_compare() { # NAME PROGRAM [ARGS...]
    local name=$1 d=$WORK/xml/$1_defaults hx vx out
    shift
    mkdir -p "$d"
    (cd "$d" && timeout -k 5 $TIMEOUT "$HL" memcheck "${MC_OPTS[@]}" --xml=yes \
        --xml-file="$d/hl.%p.xml" "$@" >/dev/null 2>"$d/hl.err" </dev/null)
    (cd "$d" && timeout -k 5 $TIMEOUT valgrind "${MC_OPTS[@]}" --xml=yes \
        --xml-file="$d/vg.%p.xml" "$@" >/dev/null 2>&1 </dev/null)
    hx=$(xml_of "$d/hl") vx=$(xml_of "$d/vg")
    if [ -n "$hx" ] && [ -n "$vx" ]; then
        out=$(python3 "$VGXML" compare "xml-$name (memcheck's defaults)" "$vx" "$hx" 2>&1)
        echo "$out"
        PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
        FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
    else
        fail "xml-$name (memcheck's defaults)" "no readable XML ($(head -c 300 "$d/hl.err"))"
    fi
}
if [ $HAVE_VG = 1 ]; then
    defaults_compare threads_ended "$PROGS/threads_ended"
    mkdir -p "$WORK/stdio_exit"
    defaults_compare stdio_exit "$PROGS/stdio_exit" "$WORK/stdio_exit"
    defaults_compare libc_own "$PROGS/libc_own"
    defaults_compare cxx_new_delete "$PROGS/cxx_new_delete"
fi

# Writes past a block: memcheck's InvalidWrite is at the write; heaplens finds the guard bytes
# changed at the release (its stack) or at exit (the allocation's stack then).
d=$WORK/xml/err_overflow
mkdir -p "$d"
timeout -k 5 $TIMEOUT "$HL" memcheck -q --xml=yes --xml-file="$d/hl.xml" "$PROGS/err_overflow" >/dev/null 2>&1 </dev/null
got=$(python3 - "$d/hl.xml" "$VGXML" <<'EOF' 2>&1
import sys, importlib.util
spec = importlib.util.spec_from_file_location("vgxml", sys.argv[2]); v = importlib.util.module_from_spec(spec); spec.loader.exec_module(v)
print(" ".join(sorted("%s:%s" % (e["kind"], v.top_functions(e["stack"])[1]) for e in v.read(sys.argv[1])["errors"])))
EOF
)
[ "$got" = "InvalidWrite:overflow_kept InvalidWrite:release_overflowed" ] &&
    pass "xml-err_overflow (InvalidWrite at the release, and at exit with the allocation's stack)" ||
    fail xml-err_overflow "$got"

# --- 2. the command line and the text ---------------------------------------------------------
MIXED=$PROGS/dropin_mixed
T=$WORK/text
mkdir -p "$T"
cd "$T" || exit 1

# mc NAME [memcheck options...] : heaplens memcheck on dropin_mixed; stdout in $T/NAME.out,
# stderr in $T/NAME.err, exit status in ST.
mc() {
    local name=$1
    shift
    timeout -k 5 $TIMEOUT "$HL" memcheck "$@" "$MIXED" >"$T/$name.out" 2>"$T/$name.err" </dev/null
    ST=$?
}
has() { grep -q -- "$2" "$1"; }

mc default
if [ $ST = 3 ] && has "$T/default.out" "dropin_mixed done" &&
    has "$T/default.err" "LEAK SUMMARY:" && has "$T/default.err" "definitely lost: 256 bytes in 5 blocks" &&
    has "$T/default.err" "Rerun with --leak-check=full to see details of leaked memory" &&
    ! has "$T/default.err" "in loss record" &&
    has "$T/default.err" "ERROR SUMMARY: 1 errors from 1 contexts (suppressed: 0 from 0)"; then
    pass "text-default (summary leak check, the program's output and exit status 3)"
else
    fail text-default "status $ST; $(head -c 400 "$T/default.err")"
fi

mc full --leak-check=full
pid=$(sed -n 's/^==\([0-9]*\)== .*/\1/p' "$T/full.err" | head -1)
if [ $ST = 3 ] && [ -n "$pid" ] && ! grep -v "^==$pid== " "$T/full.err" | grep -q . &&
    has "$T/full.err" "==$pid== 100 bytes in 1 blocks are definitely lost in loss record 2 of 3" &&
    has "$T/full.err" "==$pid==    by 0x[0-9A-F]*: leak_alpha (dropin_mixed.c:11)" &&
    has "$T/full.err" "==$pid== 144 bytes in 3 blocks are definitely lost in loss record 3 of 3" &&
    has "$T/full.err" "==$pid==    at 0x[0-9A-F]*: calloc (in .*libheaplens.so)" &&
    has "$T/full.err" "==$pid== Invalid free() / delete / delete\[\] / realloc()" &&
    has "$T/full.err" "==$pid== HEAP SUMMARY:" &&
    has "$T/full.err" "==$pid== ERROR SUMMARY: 4 errors from 4 contexts (suppressed: 0 from 0)"; then
    pass "text-full (==PID== on every line, loss records with their stacks, summaries)"
else
    fail text-full "status $ST; $(head -c 600 "$T/full.err")"
fi
if [ $HAVE_VG = 1 ]; then
    timeout -k 5 $TIMEOUT valgrind --leak-check=full "$MIXED" >/dev/null 2>"$T/vg-full.err" </dev/null
    want=$(grep -o "ERROR SUMMARY: .*" "$T/vg-full.err")
    got=$(grep -o "ERROR SUMMARY: .*" "$T/full.err")
    [ -n "$want" ] && [ "$want" = "$got" ] && pass "text-error-summary as memcheck's ($got)" ||
        fail text-error-summary "memcheck '$want', heaplens '$got'"
    want=$(grep -oE "(definitely|indirectly|possibly) lost: .*" "$T/vg-full.err")
    got=$(grep -oE "(definitely|indirectly|possibly) lost: .*" "$T/full.err")
    [ -n "$want" ] && [ "$want" = "$got" ] && pass "text-leak-summary as memcheck's" ||
        fail text-leak-summary "memcheck '$want', heaplens '$got'"
else
    skip text-vs-memcheck "valgrind is not installed"
fi

mc quiet -q --leak-check=full
if has "$T/quiet.err" "in loss record" && ! has "$T/quiet.err" "HEAP SUMMARY" && ! has "$T/quiet.err" "ERROR SUMMARY"; then
    pass "text-quiet (-q: errors and loss records only)"
else
    fail text-quiet "$(head -c 300 "$T/quiet.err")"
fi

mc nocheck --leak-check=no
has "$T/nocheck.err" "For a detailed leak analysis, rerun with: --leak-check=full" && ! has "$T/nocheck.err" "LEAK SUMMARY" &&
    pass "text-leak-check-no" || fail text-leak-check-no "$(head -c 300 "$T/nocheck.err")"

mc callers --leak-check=full --num-callers=2
if ! awk '/in loss record 2 of 3/{n=0; f=1; next} f && /   (at|by) /{n++} f && /== $/{print n; exit}' "$T/callers.err" | grep -qx 2; then
    fail text-num-callers "$(grep -A4 'loss record 2 of 3' "$T/callers.err")"
else
    pass "text-num-callers (--num-callers=2: two frames, the allocator's and leak_alpha)"
fi

# Which loss records are shown, and which count as errors: as memcheck decides.
# kinds NAME OPTIONS...: heaplens's loss record lines and ERROR SUMMARY (and memcheck's, in
# VG_KINDS, where valgrind is installed)
kinds() {
    local name=$1
    shift
    mc "$name" --leak-check=full "$@"
    KINDS=$(grep -oE "(in loss record .*|ERROR SUMMARY: .*)" "$T/$name.err")
    VG_KINDS=$KINDS
    [ $HAVE_VG = 1 ] && VG_KINDS=$(timeout -k 5 $TIMEOUT valgrind --leak-check=full "$@" "$MIXED" 2>&1 >/dev/null </dev/null |
        grep -oE "(in loss record .*|ERROR SUMMARY: .*)")
}
kinds errors_none --errors-for-leak-kinds=none
[ "$(grep -c 'in loss record' <<<"$KINDS")" = 3 ] && grep -q "ERROR SUMMARY: 1 errors from 1 contexts" <<<"$KINDS" &&
    [ "$KINDS" = "$VG_KINDS" ] && pass "--errors-for-leak-kinds=none: the 3 records shown, only the double free an error (as memcheck)" ||
    fail errors-for-leak-kinds "heaplens: $KINDS; memcheck: $VG_KINDS"
kinds show_none --show-leak-kinds=none
! grep -q 'in loss record' <<<"$KINDS" && grep -q "ERROR SUMMARY: 4 errors from 4 contexts" <<<"$KINDS" &&
    [ "$KINDS" = "$VG_KINDS" ] && pass "--show-leak-kinds=none: no record shown, all 4 errors counted (as memcheck)" ||
    fail show-leak-kinds-none "heaplens: $KINDS; memcheck: $VG_KINDS"

# -v says which suppressions were used, and how often
printf '{\n   alpha\n   Memcheck:Leak\n   fun:malloc\n   fun:leak_alpha\n}\n' >"$T/alpha.supp"
mc verbose -v --leak-check=full --suppressions="$T/alpha.supp"
grep -qE '^--[0-9]+-- used_suppression: +1 alpha .*alpha.supp:2 suppressed: [0-9,]+ bytes in 1 blocks$' "$T/verbose.err" &&
    pass "-v: used_suppression: 1 alpha FILE:2 suppressed: N bytes in 1 blocks, as memcheck says it" ||
    fail verbose "$(grep -m3 used_supp "$T/verbose.err")"
if [ $HAVE_VG = 1 ]; then
    hl_used=$(sed -n 's/^--[0-9]*-- used_suppression: *//p' "$T/verbose.err")
    vg_used=$(timeout -k 5 $TIMEOUT valgrind -v --leak-check=full --suppressions="$T/alpha.supp" "$MIXED" 2>&1 >/dev/null </dev/null |
        sed -n 's/^--[0-9]*-- used_suppression: *//p')
    [ -n "$hl_used" ] && [ "$hl_used" = "$vg_used" ] && pass "-v: the used_suppression line is memcheck's, word for word" ||
        fail "-v: used_suppression line" "heaplens '$hl_used', memcheck '$vg_used'"
fi

# --trace-children: memcheck's report on an exec'd image with yes; with no (the default) the
# program's report ends at its exec (no leak summary: it did not exit)
for tc in yes no; do
    mkdir -p "$T/tc_$tc"
    (cd "$T/tc_$tc" && timeout -k 5 $TIMEOUT "$HL" memcheck --trace-children=$tc --leak-check=full \
        --log-file="$T/tc_$tc/hl.%p" "$PROGS/exec_parent" >/dev/null 2>&1 </dev/null)
    st=$?
    got=$(cat "$T/tc_$tc"/hl.* 2>/dev/null | grep -oE "(definitely lost: .*|Command: .*exec_[a-z]*)" | sed 's|Command: .*/|Command: |' | sort | tr '\n' ';')
    want=$([ $tc = yes ] && echo "Command: exec_parent;Command: exec_target;definitely lost: 222 bytes in 1 blocks;" ||
        echo "Command: exec_parent;")
    if [ $HAVE_VG = 1 ]; then
        (cd "$T/tc_$tc" && timeout -k 5 $TIMEOUT valgrind --trace-children=$tc --leak-check=full \
            --log-file="$T/tc_$tc/vg.%p" "$PROGS/exec_parent" >/dev/null 2>&1 </dev/null)
        want=$(cat "$T/tc_$tc"/vg.* 2>/dev/null | grep -oE "(definitely lost: .*|Command: .*exec_[a-z]*)" | sed 's|Command: .*/|Command: |' | sort | tr '\n' ';')
    fi
    [ $st = 7 ] && [ "$got" = "$want" ] && pass "--trace-children=$tc: $got (status 7, as memcheck)" ||
        fail "trace-children-$tc" "status $st; heaplens '$got', memcheck '$want'"
done

mc exitcode --leak-check=full --error-exitcode=42
[ $ST = 42 ] && pass "error-exitcode (42 when errors were found)" || fail error-exitcode "status $ST"
timeout -k 5 $TIMEOUT "$HL" memcheck --error-exitcode=42 "$PROGS/exit_return" >/dev/null 2>&1 </dev/null
st=$?
want=$("$PROGS/exit_return" >/dev/null 2>&1; echo $?)
[ $st = "$want" ] && pass "error-exitcode not taken without errors (status $st as the program's)" ||
    fail error-exitcode-clean "status $st, the program's $want"

FOO=qval mc logfile --leak-check=full "--log-file=$T/log.%p.%q{FOO}.txt"
pid=$(ls "$T" | sed -n 's/^log\.\([0-9]*\)\.qval\.txt$/\1/p')
if [ -n "$pid" ] && has "$T/log.$pid.qval.txt" "==$pid== ERROR SUMMARY: 4 errors" && ! has "$T/logfile.err" "ERROR SUMMARY"; then
    pass "log-file (%p is the program's pid, %q{FOO} the environment's FOO)"
else
    fail log-file "$(ls "$T"); $(head -c 300 "$T/logfile.err")"
fi
timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --log-fd=7 "$MIXED" 7>"$T/fd7.txt" >/dev/null 2>"$T/fd7.err" </dev/null
has "$T/fd7.txt" "ERROR SUMMARY: 4 errors" && ! has "$T/fd7.err" "ERROR SUMMARY" &&
    pass "log-fd (the report on descriptor 7)" || fail log-fd "$(head -c 300 "$T/fd7.err")"

# --xml-socket, as Qt Creator and KDevelop listen for memcheck's XML
rm -f "$T/port"
timeout 200 python3 - "$T/port" "$T/socket.xml" <<'EOF' &
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); s.settimeout(180)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
c, _ = s.accept(); data = b""
while True:
    b = c.recv(65536)
    if not b: break
    data += b
open(sys.argv[2], "wb").write(data)
EOF
listener=$!
for i in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.2; done
mc socket --leak-check=full --xml=yes "--xml-socket=127.0.0.1:$(cat "$T/port" 2>/dev/null)"
wait $listener
got=$(python3 "$VGXML" summary "$T/socket.xml" 2>&1 | grep -c '"kind"')
[ "$got" = 4 ] && [ ! -s "$T/socket.err" ] && pass "xml-socket (the XML over TCP to a listener: 4 errors)" ||
    fail xml-socket "$got errors; $(head -c 300 "$T/socket.err")"

timeout -k 5 $TIMEOUT "$HLM" --leak-check=full "$MIXED" >/dev/null 2>"$T/argv0.err" </dev/null
has "$T/argv0.err" "ERROR SUMMARY: 4 errors from 4 contexts" && pass "heaplens-memcheck (the binary by that name is heaplens memcheck)" ||
    fail heaplens-memcheck "$(head -c 300 "$T/argv0.err")"

mc unknown --track-origins=yes --vgdb=no --leak-check=full
if [ $ST = 3 ] && [ "$(grep -c '^heaplens: memcheck: .*has no effect' "$T/unknown.err")" = 2 ] && has "$T/unknown.err" "ERROR SUMMARY: 4 errors"; then
    pass "other valgrind options (one note each, never a failure)"
else
    fail other-options "status $ST; $(head -c 300 "$T/unknown.err")"
fi

mc noxmldest --xml=yes
[ $ST = 1 ] && [ "$(wc -l <"$T/noxmldest.err")" = 1 ] && has "$T/noxmldest.err" "needs a destination" &&
    pass "--xml=yes without a destination: one line, status 1" || fail xml-no-destination "status $ST; $(cat "$T/noxmldest.err")"
timeout -k 5 $TIMEOUT "$HL" memcheck "$WORK/no-such-program" >/dev/null 2>"$T/noprog.err" </dev/null
st=$?
[ $st = 127 ] && [ "$(wc -l <"$T/noprog.err")" = 1 ] && pass "missing program: one line, status 127" ||
    fail missing-program "status $st; $(cat "$T/noprog.err")"
timeout -k 5 $TIMEOUT "$HL" memcheck --help >"$T/help.out" 2>&1
[ $? = 0 ] && has "$T/help.out" "--suppressions=FILE" && pass "memcheck --help" || fail memcheck-help "$(head -3 "$T/help.out")"
left=$(find /tmp -maxdepth 1 -name 'heaplens-memcheck-*' -newer "$T/default.out" 2>/dev/null | wc -l)
[ "$left" = 0 ] && pass "traces removed after the report" || fail traces-left "$left directories left in /tmp"

# --- 3. suppressions in Valgrind's format ------------------------------------------------------
S=$WORK/supp
mkdir -p "$S"
# suppressed NAME FILE : runs with FILE; sets XML (the digest of the XML, JSON) and TXT.
suppressed() {
    timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --suppressions="$2" --xml=yes \
        --xml-file="$S/$1.xml" --log-file="$S/$1.txt" "$MIXED" >/dev/null 2>"$S/$1.err" </dev/null
    TXT=$S/$1.txt
}
# user functions (the program's innermost) of the errors in an XML file, sorted
user_fns() {
    python3 - "$1" "$VGXML" <<'EOF'
import sys, importlib.util
spec = importlib.util.spec_from_file_location("vgxml", sys.argv[2]); v = importlib.util.module_from_spec(spec); spec.loader.exec_module(v)
print(" ".join(sorted(v.top_functions(e["stack"])[1] for e in v.read(sys.argv[1])["errors"])))
EOF
}
supp_count() { python3 "$VGXML" summary "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['suppcounts'].get('$2', 0))"; }
ALL="free_twice leak_alpha leak_beta strdup"

cat >"$S/fun.supp" <<'EOF'
# a leak in leak_alpha, named with both wildcards
{
   alpha-by-fun
   Memcheck:Leak
   match-leak-kinds: definite,possible
   fun:mal?oc
   fun:leak_al*
}
EOF
suppressed fun "$S/fun.supp"
if [ "$(user_fns "$S/fun.xml")" = "free_twice leak_beta strdup" ] && [ "$(supp_count "$S/fun.xml" alpha-by-fun)" = 1 ] &&
    has "$TXT" "suppressed: 100 bytes in 1 blocks" && has "$TXT" "ERROR SUMMARY: 3 errors from 3 contexts (suppressed: 1 from 1)"; then
    pass "suppress by fun: with * and ? (leak_alpha's 100 bytes, nothing else)"
else
    fail supp-fun "$(user_fns "$S/fun.xml"); $(grep suppressed "$TXT")"
fi

cat >"$S/obj.supp" <<'EOF'
{
   libc-by-obj
   Memcheck:Leak
   fun:malloc
   obj:*/libc.so*
}
EOF
suppressed obj "$S/obj.supp"
[ "$(user_fns "$S/obj.xml")" = "free_twice leak_alpha leak_beta" ] && has "$TXT" "suppressed: 12 bytes in 1 blocks" &&
    pass "suppress by obj: with * (strdup's block, allocated inside libc)" || fail supp-obj "$(user_fns "$S/obj.xml")"

cat >"$S/dots.supp" <<'EOF'
{
   beta-anywhere
   Memcheck:Leak
   ...
   fun:leak_beta
}
{
   reachable-only
   Memcheck:Leak
   match-leak-kinds: reachable
   ...
   fun:leak_alpha
}
{
   double-free
   Memcheck:Free
   fun:free
   fun:free_twice
}
{
   for-another-tool
   Helgrind:Race
   fun:*
}
EOF
suppressed dots "$S/dots.supp"
[ "$(user_fns "$S/dots.xml")" = "leak_alpha strdup" ] && [ "$(supp_count "$S/dots.xml" double-free)" = 1 ] &&
    [ "$(supp_count "$S/dots.xml" reachable-only)" = 0 ] &&
    pass "suppress with ... frames, Memcheck:Free, match-leak-kinds (a reachable-only entry leaves a definite leak)" ||
    fail supp-dots "$(user_fns "$S/dots.xml")"

printf '{\n   broken\n   Memcheck:Leak\n   fun:malloc\n' >"$S/bad.supp"
suppressed bad "$S/bad.supp"
[ "$(wc -l <"$S/bad.err")" = 1 ] && has "$S/bad.err" "bad.supp:4: the suppression 'broken' has no closing }" &&
    pass "a broken suppression file: one line naming the file and line" || fail supp-bad "$(cat "$S/bad.err")"

# --gen-suppressions=all, fed back: all of them suppress every error; each alone exactly its own.
timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --gen-suppressions=all --log-file="$S/gen.txt" "$MIXED" >/dev/null 2>&1 </dev/null
awk '/^\{/{n++; print > ("'"$S"'/gen." n ".supp"); f=1; next} f{print > ("'"$S"'/gen." n ".supp")} /^\}/{f=0}' "$S/gen.txt"
ngen=$(ls "$S"/gen.*.supp 2>/dev/null | wc -l)
cat "$S"/gen.*.supp >"$S/gen-all.supp" 2>/dev/null
suppressed genall "$S/gen-all.supp"
if [ "$ngen" = 4 ] && [ -z "$(user_fns "$S/genall.xml")" ] &&
    has "$TXT" "ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 4 from 4)"; then
    pass "gen-suppressions=all fed back: its 4 suppressions take all 4 errors"
else
    fail gen-all "$ngen printed; left: $(user_fns "$S/genall.xml"); $(grep 'ERROR SUMMARY' "$TXT")"
fi
for k in $(seq 1 "$ngen"); do
    fn=$(sed -n 's/^   fun:\(free_twice\|leak_alpha\|leak_beta\|__strdup\|strdup\)$/\1/p' "$S/gen.$k.supp" | head -1)
    fn=${fn#__}
    suppressed "gen$k" "$S/gen.$k.supp"
    want=$(tr ' ' '\n' <<<"$ALL" | grep -vx "$fn" | tr '\n' ' ' | sed 's/ $//')
    got=$(user_fns "$S/gen$k.xml")
    [ -n "$fn" ] && [ "$got" = "$want" ] && pass "generated suppression $k alone takes exactly its error ($fn)" ||
        fail "gen-$k" "it names '$fn'; left: '$got', wanted '$want'"
done
timeout -k 5 $TIMEOUT "$HL" memcheck -q --leak-check=full --gen-suppressions=all --xml=yes --xml-file="$S/genxml.xml" "$MIXED" >/dev/null 2>&1 </dev/null
python3 - "$S/genxml.xml" "$VGXML" "$S/from-xml.supp" <<'EOF'
import sys, importlib.util
spec = importlib.util.spec_from_file_location("vgxml", sys.argv[2]); v = importlib.util.module_from_spec(spec); spec.loader.exec_module(v)
open(sys.argv[3], "w").write("\n".join(e["suppression"] for e in v.read(sys.argv[1])["errors"]) + "\n")
EOF
suppressed fromxml "$S/from-xml.supp"
[ -z "$(user_fns "$S/fromxml.xml")" ] && has "$TXT" "suppressed: 4 from 4" &&
    pass "the XML's <suppression><rawtext>, fed back, takes every error" || fail gen-xml "$(user_fns "$S/fromxml.xml")"

# A stripped program: with no main to stop at, memcheck ends each stack at the C library's
# start-up frame and names it "(below main)", in its suppressions too; the one it would write,
# fed back, takes the leak.
cp "$PROGS/stripped_leak" "$S/stripped" && strip "$S/stripped"
timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --gen-suppressions=all --log-file="$S/stripped.txt" \
    "$S/stripped" >/dev/null 2>&1 </dev/null
sed -n '/^{/,/^}/p' "$S/stripped.txt" >"$S/stripped.supp"
frames=$(grep -E '^   (fun|obj):' "$S/stripped.supp" | sed 's/^   //' | tr '\n' ' ')
[ "$frames" = "fun:malloc obj:$S/stripped obj:$S/stripped fun:(below main) " ] && has "$S/stripped.txt" ": (below main) (" &&
    pass "a stripped program: its stack ends at (below main), as memcheck's" || fail stripped-below-main "frames: $frames"
timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --suppressions="$S/stripped.supp" --log-file="$S/stripped2.txt" \
    "$S/stripped" >/dev/null 2>&1 </dev/null
has "$S/stripped2.txt" "definitely lost: 0 bytes in 0 blocks" && has "$S/stripped2.txt" "suppressed: 33 bytes in 1 blocks" &&
    pass "a stripped program: the suppression ending in fun:(below main) takes its leak" ||
    fail stripped-supp "$(grep -E 'definitely lost|suppressed:' "$S/stripped2.txt" | tr '\n' ' ')"
if [ $HAVE_VG = 1 ]; then
    timeout -k 5 $TIMEOUT valgrind --leak-check=full --gen-suppressions=all --log-file="$S/stripped_vg.txt" \
        "$S/stripped" >/dev/null 2>&1 </dev/null
    vg_frames=$(sed -n '/^{/,/^}/p' "$S/stripped_vg.txt" | grep -E '^   (fun|obj):' | sed 's/^   //' | tr '\n' ' ')
    [ -n "$vg_frames" ] && [ "$vg_frames" = "$frames" ] &&
        pass "a stripped program: the suppression is memcheck's, frame for frame" ||
        fail stripped-vs-memcheck "memcheck '$vg_frames', heaplens '$frames'"
fi

# A suppressed leak counts in the ERROR SUMMARY's "suppressed" only where its kind would have been
# an error (--errors-for-leak-kinds), as memcheck counts it: libc_own's 24 reachable bytes, kept
# by main, under a suppression of them; its 40 bytes definitely lost stay the one error.
cat >"$S/reach.supp" <<'EOF'
{
   kept-in-main
   Memcheck:Leak
   match-leak-kinds: reachable
   fun:malloc
   fun:main
}
EOF
for ek in definite,possible all; do
    want="1 errors from 1 contexts (suppressed: 0 from 0)"
    [ $ek = all ] && want="1 errors from 1 contexts (suppressed: 1 from 1)"
    timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=$ek \
        --suppressions="$S/reach.supp" --log-file="$S/reach.$ek.txt" "$PROGS/libc_own" >/dev/null 2>&1 </dev/null
    has "$S/reach.$ek.txt" "ERROR SUMMARY: $want" && has "$S/reach.$ek.txt" "suppressed: 24 bytes in 1 blocks" &&
        pass "a suppressed reachable leak, --errors-for-leak-kinds=$ek: $want" ||
        fail "supp-count-$ek" "$(grep -E 'ERROR SUMMARY|suppressed:' "$S/reach.$ek.txt" | tr '\n' ' ')"
done

# --num-callers counts addresses, as memcheck's does: the functions inlined at one are shown
# beside it. inlined_leak's lost block: malloc's address, lose_outer's (make_block and make_inner
# inlined there), main's.
lost_frames() { # LOG: the function of each frame of the definitely lost record
    sed -n '/definitely lost in/,/^==[0-9]*== $/p' "$1" |
        sed -n 's/^==[0-9]*== *\(at\|by\) 0x[0-9A-Fa-f]*: \([^ ]*\).*/\2/p' | tr '\n' ' ' | sed 's/ $//'
}
for nc in 2 3; do
    want="malloc make_block make_inner lose_outer"
    [ $nc = 3 ] && want="$want main"
    timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --num-callers=$nc --log-file="$S/inl.$nc.txt" \
        "$PROGS/inlined_leak" >/dev/null 2>&1 </dev/null
    got=$(lost_frames "$S/inl.$nc.txt")
    [ "$got" = "$want" ] && pass "--num-callers=$nc: $nc addresses, their inlined functions beside them ($got)" ||
        fail "num-callers-$nc" "got '$got', wanted '$want'"
    if [ $HAVE_VG = 1 ]; then
        timeout -k 5 $TIMEOUT valgrind --leak-check=full --num-callers=$nc --log-file="$S/inl_vg.$nc.txt" \
            "$PROGS/inlined_leak" >/dev/null 2>&1 </dev/null
        vg=$(lost_frames "$S/inl_vg.$nc.txt")
        [ "$vg" = "$got" ] && pass "--num-callers=$nc: memcheck's frames too" ||
            fail "num-callers-$nc-vs-memcheck" "memcheck '$vg', heaplens '$got'"
    fi
done

# The allocator's frame as memcheck names it: its realloc of NULL calls its malloc, and glibc's
# reallocarray calls realloc (memcheck replaces none): malloc, malloc, realloc on top of
# realloc_null's three lost blocks, so the suppressions memcheck writes for them match.
top_frames() { # LOG: "function caller" of each definitely lost record, by size
    sed -n '/definitely lost in/,/^==[0-9]*== $/p' "$1" |
        sed -n 's/^==[0-9]*== *\(at\|by\) 0x[0-9A-Fa-f]*: \([^ ]*\).*/\2/p' | paste -d' ' - - | tr '\n' ',' | sed 's/,$//'
}
timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --num-callers=2 --log-file="$S/rn.txt" "$PROGS/realloc_null" >/dev/null 2>&1 </dev/null
got=$(top_frames "$S/rn.txt")
want="malloc lose_reallocarray_null,realloc lose_reallocarray_grow,malloc lose_realloc_null"
[ "$got" = "$want" ] && pass "realloc and reallocarray of NULL named malloc, reallocarray of a block realloc, as memcheck" ||
    fail realloc-names "got '$got', wanted '$want'"
if [ $HAVE_VG = 1 ]; then
    timeout -k 5 $TIMEOUT valgrind --leak-check=full --num-callers=2 --log-file="$S/rn_vg.txt" "$PROGS/realloc_null" >/dev/null 2>&1 </dev/null
    vg=$(top_frames "$S/rn_vg.txt")
    [ "$vg" = "$got" ] && pass "realloc and reallocarray: memcheck's own names too" ||
        fail realloc-names-vs-memcheck "memcheck '$vg', heaplens '$got'"
fi

# A recursion repeats one return address: each of its frames is an address of its own
# (stack_shapes: leak_at_leaf under descend x 4; 5 frames at --num-callers=5).
timeout -k 5 $TIMEOUT "$HL" memcheck --leak-check=full --num-callers=5 --log-file="$S/rec.txt" \
    "$PROGS/stack_shapes" >/dev/null 2>&1 </dev/null
got=$(sed -n '/definitely lost in loss record 1 of/,/^==[0-9]*== $/p' "$S/rec.txt" |
    sed -n 's/^==[0-9]*== *\(at\|by\) 0x[0-9A-Fa-f]*: \([^ ]*\).*/\2/p' | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "malloc leak_at_leaf descend descend descend" ] &&
    pass "--num-callers=5 in a recursion: each repeated address counts ($got)" || fail num-callers-recursion "got '$got'"

# --- 4. SARIF ---------------------------------------------------------------------------------
F=$WORK/sarif
mkdir -p "$F"
(cd "$F" && timeout -k 5 $TIMEOUT "$HL" run -q --sarif "$F/mixed.sarif" -o "$F/mixed.hl" -- "$MIXED" >/dev/null 2>"$F/mixed.err" </dev/null)
(cd "$F" && timeout -k 5 $TIMEOUT "$HL" run -q --sarif "$F/overflow.sarif" -- "$PROGS/err_overflow" >/dev/null 2>&1 </dev/null)
(cd "$F" && timeout -k 5 $TIMEOUT "$HL" run -q -o "$F/list.hl" -- "$PROGS/reach_list" >/dev/null 2>&1 </dev/null)
(cd "$F" && timeout -k 5 $TIMEOUT "$HL" report -q --sarif "$F/list.sarif" "$F/list.hl" >/dev/null 2>&1)
(cd "$F" && timeout -k 5 $TIMEOUT "$HL" report -q --summary --sarif "$F/views.sarif" "$F/mixed.hl" >/dev/null 2>&1)
# results FILE: "ruleId@file:line" of each result, sorted; the function a result's location
# names is on its first code flow.
results() {
    python3 - "$1" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
out = []
for r in run["results"]:
    loc = r["locations"][0]
    phys = loc["physicalLocation"]
    flow = r["codeFlows"][0]["threadFlows"][0]["locations"]
    names = [f["location"].get("logicalLocations", [{}])[0].get("name") for f in flow]
    if loc["logicalLocations"][0]["name"] not in names:
        sys.exit("the result's function is not on its code flow")
    if run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] != r["ruleId"]:
        sys.exit("ruleIndex does not point at ruleId")
    out.append("%s@%s:%s" % (r["ruleId"].split("/")[1], phys["artifactLocation"]["uri"].split("/")[-1],
                             phys.get("region", {}).get("startLine")))
print(" ".join(sorted(out)))
EOF
}
want="definitely-lost@dropin_mixed.c:11 definitely-lost@dropin_mixed.c:18 definitely-lost@dropin_mixed.c:24 double-free@dropin_mixed.c:32"
got=$(results "$F/mixed.sarif" 2>&1)
[ "$got" = "$want" ] && pass "sarif-run (a result per loss record and heap error, at the program's own line)" ||
    fail sarif-run "$got"
got=$(results "$F/views.sarif" 2>&1)
[ "$got" = "$want" ] && pass "sarif-report (heaplens report --sarif with views, the same results)" || fail sarif-report "$got"
got=$(results "$F/list.sarif" 2>&1)
[ "$got" = "definitely-lost@reach_list.c:13 indirectly-lost@reach_list.c:13" ] &&
    pass "sarif-report of a trace (definite and indirect records)" || fail sarif-report-list "$got"
got=$(results "$F/overflow.sarif" 2>&1)
[ "$(wc -w <<<"$got")" = 2 ] && [ "$(grep -o 'overflow@err_overflow.c' <<<"$got" | wc -l)" = 2 ] &&
    pass "sarif-overflow (at the release, and at exit at the allocation)" || fail sarif-overflow "$got"

# Microsoft's SARIF multitool, from the npm registry into a cache kept between runs.
TOOLS=${XDG_CACHE_HOME:-$HOME/.cache}/heaplens-tests/sarif-multitool
MT=$TOOLS/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool
if [ ! -f "$MT" ] && command -v npm >/dev/null 2>&1; then
    mkdir -p "$TOOLS"
    timeout -k 5 300 npm install --no-audit --no-fund --prefix "$TOOLS" @microsoft/sarif-multitool >"$WORK/npm.log" 2>&1
fi
if [ -f "$MT" ]; then
    chmod u+x "$MT" # its postinstall step, which npm may not run
    for f in mixed overflow list views; do
        timeout -k 5 $TIMEOUT "$MT" validate "$F/$f.sarif" --output "$F/$f.validation.sarif" >"$F/$f.validation.log" 2>&1
        st=$?
        errs=$(python3 -c "import json,sys; print(sum(r.get('level', 'warning') == 'error' for run in json.load(open(sys.argv[1]))['runs'] for r in run.get('results', [])))" "$F/$f.validation.sarif" 2>&1)
        [ $st = 0 ] && [ "$errs" = 0 ] && pass "sarif-multitool validate $f.sarif: no errors ($(grep -c ': warning ' "$F/$f.validation.log") warnings)" ||
            fail "sarif-validate-$f" "status $st, errors '$errs': $(grep -m3 ': error ' "$F/$f.validation.log")"
    done
else
    skip sarif-validate "the SARIF multitool could not be installed from npm ($(tail -1 "$WORK/npm.log" 2>/dev/null))"
fi

# --- 5. ctest -T memcheck --------------------------------------------------------------------------
# defects DIR: "test:type=count ..." from CTest's DynamicAnalysis.xml, sorted
defects() {
    python3 - "$1" <<'EOF'
import glob, sys, xml.etree.ElementTree as ET
files = glob.glob(sys.argv[1] + "/Testing/*/DynamicAnalysis.xml")
if not files:
    sys.exit("no DynamicAnalysis.xml")
out = []
for t in ET.parse(files[0]).getroot().iter("Test"):
    name = t.findtext("Name")
    for d in t.iter("Defect"):
        if d.get("type"):
            out.append("%s:%s=%s" % (name, d.get("type"), d.text))
print(" ".join(sorted(out)))
EOF
}
# memcheck_project DIR COMMAND [CMAKE OPTIONS...]: configure and build tests/cmake_memcheck,
# then ctest -T memcheck
memcheck_project() {
    local dir=$1 cmd=$2
    shift 2
    mkdir -p "$dir"
    (cd "$dir" && cmake -S "$ROOT/tests/cmake_memcheck" -B . -DMEMORYCHECK_COMMAND="$cmd" \
        -DMEMORYCHECK_TYPE=Valgrind "$@" && make && timeout -k 5 300 ctest -T memcheck) >"$dir.log" 2>&1
}
if command -v cmake >/dev/null 2>&1 && command -v ctest >/dev/null 2>&1; then
    want="erring:FIM=2 leaky:Memory Leak=2 leaky:Potential Memory Leak=1"
    memcheck_project "$WORK/cmake-hl" "$HLM"
    got=$(defects "$WORK/cmake-hl" 2>&1)
    [ "$got" = "$want" ] && pass "ctest -T memcheck with heaplens-memcheck: $got" ||
        fail ctest-heaplens "got '$got', wanted '$want' (log: $(tail -5 "$WORK/cmake-hl.log" | tr '\n' ' '))"
    if [ $HAVE_VG = 1 ]; then
        memcheck_project "$WORK/cmake-vg" "$(command -v valgrind)"
        vg=$(defects "$WORK/cmake-vg" 2>&1)
        [ "$vg" = "$got" ] && pass "ctest -T memcheck: the same defects per test as with valgrind" ||
            fail ctest-vs-valgrind "valgrind '$vg', heaplens '$got'"
    else
        skip ctest-vs-valgrind "valgrind is not installed"
    fi
    # MEMORYCHECK_SUPPRESSIONS_FILE: CTest hands it over as --suppressions
    printf '{\n   lose-one\n   Memcheck:Leak\n   ...\n   fun:lose_one\n}\n' >"$WORK/cmake.supp"
    want="erring:FIM=2 leaky:Memory Leak=1 leaky:Potential Memory Leak=1"
    memcheck_project "$WORK/cmake-hl-supp" "$HLM" -DMEMORYCHECK_SUPPRESSIONS_FILE="$WORK/cmake.supp"
    got=$(defects "$WORK/cmake-hl-supp" 2>&1)
    if [ $HAVE_VG = 1 ]; then
        memcheck_project "$WORK/cmake-vg-supp" "$(command -v valgrind)" -DMEMORYCHECK_SUPPRESSIONS_FILE="$WORK/cmake.supp"
        want=$(defects "$WORK/cmake-vg-supp" 2>&1)
    fi
    [ "$got" = "$want" ] && pass "ctest -T memcheck with MEMORYCHECK_SUPPRESSIONS_FILE: $got (as with valgrind)" ||
        fail ctest-suppressions "got '$got', wanted '$want' (log: $(tail -5 "$WORK/cmake-hl-supp.log" | tr '\n' ' '))"
else
    skip ctest "cmake or ctest is not installed"
fi

# --- 6. make install, man page, --help -------------------------------------------------------------
I=$WORK/inst
if make -s -C "$ROOT" BUILD="$BUILD" install DESTDIR="$I" PREFIX=/usr >"$WORK/install.log" 2>&1; then
    pass "make install DESTDIR=... PREFIX=/usr"
else
    fail make-install "$(tail -3 "$WORK/install.log")"
fi
for f in bin/heaplens bin/heaplens-memcheck lib/heaplens/libheaplens.so share/man/man1/heaplens.1 \
    share/bash-completion/completions/heaplens lib/pkgconfig/heaplens.pc; do
    [ -e "$I/usr/$f" ] || fail "installed-$f" "missing"
done
IHL=$I/usr/bin/heaplens
if command -v pkg-config >/dev/null 2>&1; then
    got=$(for q in --modversion --variable=agent --variable=memcheck; do PKG_CONFIG_PATH=$I/usr/lib/pkgconfig pkg-config $q heaplens 2>&1; done | tr '\n' ' ')
    [ "$got" = "$("$IHL" --version | cut -d' ' -f2) /usr/lib/heaplens/libheaplens.so /usr/bin/heaplens-memcheck " ] &&
        pass "heaplens.pc: the version, the agent and heaplens-memcheck where installed" || fail heaplens.pc "$got"
else
    skip heaplens.pc "pkg-config is not installed"
fi
if command -v man >/dev/null 2>&1; then
    # each page installed (heaplens-memcheck.1 is a link to heaplens.1) renders, without a warning
    for page in "$I"/usr/share/man/man1/*.1; do
        MANWIDTH=80 man --warnings -l "$page" >"$WORK/man.txt" 2>"$WORK/man.err"
        st=$?
        groff -man -Tutf8 -ww -z "$page" >>"$WORK/man.err" 2>&1 # every warning groff has
        sections=$(grep -cE '^(RUN|REPORT|DIFF|HTML|MEMCHECK)$' "$WORK/man.txt")
        [ $st = 0 ] && [ ! -s "$WORK/man.err" ] && [ "$sections" = 5 ] &&
            pass "man --warnings -l ${page##*/} renders (a section per subcommand, no warnings)" ||
            fail "man-page ${page##*/}" "status $st, $sections sections; $(head -c 300 "$WORK/man.err")"
    done
else
    skip man-page "man is not installed"
fi
for c in run report diff html memcheck; do
    out=$("$IHL" $c --help 2>&1)
    st=$?
    [ $st = 0 ] && grep -q "^usage: " <<<"$out" && grep -q "heaplens $c " <<<"$out" && pass "heaplens $c --help" || fail "help-$c" "status $st: $(head -2 <<<"$out")"
done
[ "$("$IHL" --version)" = "$("$HL" --version)" ] && grep -q '^heaplens [0-9]' <<<"$("$IHL" --version)" &&
    pass "heaplens --version ($("$IHL" --version))" || fail version "$("$IHL" --version 2>&1)"
(cd "$T" && timeout -k 5 $TIMEOUT "$I/usr/bin/heaplens-memcheck" -q --leak-check=full "$MIXED" >/dev/null 2>"$WORK/inst-run.err" </dev/null)
grep -q "loss record 3 of 3" "$WORK/inst-run.err" &&
    pass "the installed heaplens-memcheck finds its agent in lib/heaplens" || fail installed-run "$(head -c 300 "$WORK/inst-run.err")"
got=$(bash -c 'source "$1"; COMP_WORDS=(heaplens me); COMP_CWORD=1; _heaplens; echo "${COMPREPLY[*]}"; COMP_WORDS=(heaplens-memcheck --leak-check=f); COMP_CWORD=1; _heaplens; echo "${COMPREPLY[*]}"' _ "$I/usr/share/bash-completion/completions/heaplens" 2>&1)
[ "$got" = $'memcheck\n--leak-check=full' ] && pass "bash completion (subcommands, memcheck's options)" || fail completion "$got"
# every command heaplens --help names (tests/integration/cli.sh checks each command's options)
cmds=$("$IHL" --help | awk '/^$/ {exit} {print}' | sed -n 's/^ *\(usage:\)\{0,1\} *heaplens \([a-z]*\) .*/\2/p' | sort | tr '\n' ' ')
got=$(bash -c 'source "$1"; COMP_WORDS=(heaplens ""); COMP_CWORD=1; _heaplens; printf "%s\n" "${COMPREPLY[@]}"' _ "$I/usr/share/bash-completion/completions/heaplens" 2>&1 | grep -v '^-' | sort | tr '\n' ' ')
[ -n "$cmds" ] && [ "$got" = "$cmds" ] && pass "installed bash completion knows every subcommand ($cmds)" ||
    fail completion-commands "offers '$got', heaplens --help names '$cmds'"
make -s -C "$ROOT" BUILD="$BUILD" uninstall DESTDIR="$I" PREFIX=/usr >/dev/null 2>&1
left=$(find "$I" -type f -o -type l | head -3)
[ -z "$left" ] && pass "make uninstall removes what make install put" || fail make-uninstall "left: $left"

echo "$PASSED passed, $FAILED failed"
[ $FAILED = 0 ]
