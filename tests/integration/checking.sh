#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# checking.sh BUILD_DIR - heap checking end to end: --redzone (underruns and overruns found at
# free, realloc and exit, aligned allocations still aligned), --paint (new and released blocks),
# --hoard (writes after free, found when a block leaves the hoard and at exit; blocks held back
# are no leaks; dangling pointers at exit), --guard-pages (each bad read or write reported at its
# instruction, the program going on; its own SIGSEGV handlers and crashes kept; -before, -abort),
# --guard-sites (the named functions' allocations only, in the program, a dlopen'd library,
# with a rate; a stripped program and a bad REGEX said in one line), in threads and under jemalloc, tcmalloc and mimalloc; leak verdicts, counts and output as
# without the options; the settings given by hand in the agent's environment; bad values refused
# in one line. Each program's bad accesses also run under valgrind's memcheck (when installed):
# where memcheck says a write hit ("N bytes before/after/inside a block of size S") heaplens must
# say the same, and memcheck's invalid reads and writes must be --guard-pages=1's faults.
# One line per check, "PASS name" or "FAIL name: reason" ("SKIP name: why"); the last line is
# "N passed, N failed"; exit 1 when anything failed.
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
LIB=$BUILD/libheaplens.so
PROG=$BUILD/programs/check_heap
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK=$HERE/check.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-checking.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=60

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }
check() {
    local out
    out=$(python3 "$CHECK" "$@" 2>&1)
    [ -n "$out" ] && echo "$out"
    PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
    FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
}
[ -x "$HL" ] && [ -f "$LIB" ] && [ -x "$PROG" ] || { fail setup "build $HL and $PROG first"; finish; }

# hl NAME [run options] -- MODE: check_heap MODE under heaplens run; the report's JSON in
# $WORK/NAME.json, its text in NAME.stderr, the program's output in NAME.stdout, status in ST.
hl() {
    local name=$1
    shift
    local args=()
    while [ "$1" != "--" ]; do args+=("$1"); shift; done
    shift
    (cd "$WORK" && timeout "$TIMEOUT" "$HL" run "${args[@]}" -o "$WORK/$name.hl" \
        --json "$WORK/$name.json" -- "$PROG" "$@" >"$WORK/$name.stdout" 2>"$WORK/$name.stderr") \
        2>/dev/null # not the shell's line on a program killed by a signal
    ST=$?
    J=$WORK/$name.json
}
expect() { # NAME STATUS STDOUT-LINE (empty: no line to find)
    if [ "$ST" -ne "$2" ]; then
        fail "$1" "exit status $ST, expected $2 ($(tail -2 "${J%.json}.stderr" | tr '\n' ' '))"
    elif [ -n "$3" ] && ! grep -qxF "$3" "${J%.json}.stdout"; then
        fail "$1" "no line '$3' in the output: $(head -3 "${J%.json}.stdout" | tr '\n' '|')"
    else
        pass "$1"
    fi
}
# The error fields that do not name stacks: "kind offset changed_bytes seen expected", one a line.
fields() {
    python3 -c '
import json, sys
for e in json.load(open(sys.argv[1]))["errors"]:
    print(e["kind"], e.get("offset"), e.get("changed_bytes"), e.get("seen"), e.get("expected"),
          (e.get("alloc_stack") or [{}])[0].get("function"),
          "released" if e.get("release_stack") else "-")' "$1" 2>&1
}
same() { # NAME GOT WANT
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got [$(echo $2)], expected [$(echo $3)]"; fi
}

# ================================================================================================
# 1. Red zones
# ================================================================================================
hl underrun --redzone=16 -- underrun
expect "redzone: underrun program runs on" 0 ""
same "redzone: an underrun found at free (offset -3) and one at exit (offset -8)" "$(fields "$J")" \
"underflow -3 1 75 d3 underrun_write -
underflow -8 1 75 38 underrun_write -"
check "redzone: underrun at free names the free's stack" "$J" "errs('underflow', 'release') == 1" \
    "errs_alloc('underflow', 'underrun_write') == 2"
if grep -q 'Address 0x[0-9a-f]* is 3 bytes before a block of size 40' "$WORK/underrun.stderr" &&
    grep -q '1 byte changed from offset -3: 75 (were d3)' "$WORK/underrun.stderr"; then
    pass "redzone: text report says where and what changed"
else
    fail "redzone: text report" "$(grep -A3 underrun "$WORK/underrun.stderr" | head -5)"
fi

hl overrun --redzone=16 -- overrun
expect "redzone: overrun program runs on" 0 ""
same "redzone: a write 5 bytes past a 20-byte block, found at free" "$(fields "$J")" \
    "overflow 25 1 6f 82 overrun_write -"

hl realloc --redzone=16 -- realloc
expect "redzone: realloc in every direction keeps the contents" 0 "realloc contents kept"
same "redzone: an overrun found at realloc, nothing else" "$(fields "$J")" \
    "overflow 16 1 72 a5 realloc_overrun -"
check "redzone: realloc's report names realloc" "$J" "errs('overflow', 'grow') == 1" \
    "calls['realloc'] >= 5"

hl aligned --redzone=16 -- aligned
expect "redzone: memalign, posix_memalign, aligned_alloc, valloc, pvalloc aligned as asked" 0 \
    "aligned as asked"
same "redzone: an underrun of an aligned_alloc(64) block found" "$(fields "$J")" \
    "underflow -1 1 76 a5 aligned -"
hl aligned_big --redzone=100 -- aligned
expect "redzone=100: still aligned as asked (zones larger than the alignment)" 0 "aligned as asked"

hl threads --redzone=16 -- threads
expect "redzone: 4 threads, 80,000 blocks" 0 "threads done"
check "redzone: threads: no error, every block seen" "$J" "errors == []" \
    "calls['malloc'] >= 80000" "calls['free'] >= 80000"

# Without checking options the guard after each block (8 bytes) is today's; an overflow it
# catches now says where and what changed too
hl overrun_plain -- overrun
same "no --redzone: the 8-byte guard catches the write 5 bytes past the end" "$(fields "$J")" \
    "overflow 25 1 6f 82 overrun_write -"

# ================================================================================================
# 2. Painting
# ================================================================================================
hl paint --paint=alloc:0xAA,free:0xDD --hoard=1M -- paint
expect "paint: new blocks 0xAA" 0 "new block painted 0xAA"
expect "paint: calloc keeps zeroes" 0 "calloc block zero"
expect "paint: released blocks 0xDD" 0 "freed block painted 0xDD"
check "paint: no error" "$J" "errors == []"
hl paint_alloc --paint=alloc:170 -- paint
expect "paint alloc alone: new blocks 0xAA (decimal 170)" 0 "new block painted 0xAA"
expect "paint alloc alone: released blocks left alone" 0 "freed block NOT painted"
hl paint_hoard --hoard=64K -- paint
expect "hoard alone paints released blocks 0xDD" 0 "freed block painted 0xDD"
expect "hoard alone leaves new blocks unpainted" 0 "new block NOT painted"

# ================================================================================================
# 3. Hoarding: writes after free
# ================================================================================================
hl uaf --hoard=4K -- uaf
expect "hoard: program with writes after free runs on" 0 "uaf done"
same "hoard: one write found when its block left the hoard, one at exit" "$(fields "$J")" \
"write_after_free 100 4 77777777 dddddddd uaf_block released
write_after_free 10 1 77 dd uaf_block released"
check "hoard: blocks held back are no leaks" "$J" "lb('definite') == 0" "lb('possible') == 0" \
    "errs_alloc('write_after_free', 'uaf_block') == 2"
if grep -q 'Invalid write to a freed block' "$WORK/uaf.stderr" &&
    grep -q 'is 100 bytes inside a block of size 256' "$WORK/uaf.stderr"; then
    pass "hoard: text report in memcheck's words"
else
    fail "hoard: text report" "$(grep -m3 -i 'freed\|inside' "$WORK/uaf.stderr")"
fi
hl uaf_exit --hoard=64M --error-exitcode=9 -- uaf
expect "hoard: --error-exitcode counts writes after free" 9 "uaf done"
same "hoard 64M: both writes found at exit" "$(fields "$J" | sort)" \
"write_after_free 10 1 77 dd uaf_block released
write_after_free 100 4 77777777 dddddddd uaf_block released"

hl dangling --hoard=1M -- dangling
expect "hoard: dangling program runs on" 0 "dangling done"
check "hoard: a live block pointing 8 bytes into a freed one is a dangling pointer" "$J" \
    "[(e['kind'], e['offset'], e['block_size']) for e in errors] == [('dangling_pointer', 8, 32)]" \
    "errs('dangling_pointer', 'make_holder') == 1" "errs_alloc('dangling_pointer', 'make_holder') == 1" \
    "lb('definite') == 0"
hl dangling_plain -- dangling
check "no --hoard: no dangling pointer is told" "$J" "errors == []"

hl threads_hoard --hoard=64M --redzone=16 -- threads
expect "hoard + redzone: 4 threads" 0 "threads done"
check "hoard + redzone: threads: no error, every free seen" "$J" "errors == []" \
    "calls['free'] >= 80000"
hl threads_small --hoard=8K -- threads
expect "hoard 8K: 4 threads evicting all along" 0 "threads done"
check "hoard 8K: threads: no error" "$J" "errors == []"

# ================================================================================================
# 3b. Guard pages: the faulting access itself
# ================================================================================================
# stacks FILE: "kind offset stack[0] stack[1] released" of each error
stacks() {
    python3 -c '
import json, sys
for e in json.load(open(sys.argv[1]))["errors"]:
    fr = [f.get("function") for f in e.get("stack") or []] + ["-", "-"]
    print(e["kind"], e.get("offset"), fr[0], fr[1], "released" if e.get("release_stack") else "-")' "$1" 2>&1
}
GP_WANT="overflow 96 write_past gp -
read_overflow 96 read_past gp -
read_after_free 8 read_freed gp released
write_after_free 16 write_freed gp released"
hl gp --guard-pages=1 -- gp
expect "guard pages: the program goes on after each fault" 0 "gp done"
same "guard pages: write and read past the end, read and write after free, each at its instruction" \
    "$(stacks "$J")" "$GP_WANT"
check "guard pages: allocation stacks" "$J" "errs_alloc(None, 'gp_block') == 4"
if grep -q 'Invalid read of a freed block (guard page)' "$WORK/gp.stderr" &&
    grep -q 'Address 0x[0-9a-f]* is 0 bytes after a block of size 96' "$WORK/gp.stderr"; then
    pass "guard pages: text report"
else
    fail "guard pages: text report" "$(grep -m4 Invalid "$WORK/gp.stderr")"
fi
hl gp_before --guard-pages=1 --guard-pages-before -- gp_before
expect "guard pages before: the program goes on" 0 "gp_before done"
same "guard pages before: a write 1 byte and a read 4 bytes before a block, at their instructions" \
    "$(stacks "$J")" "underflow -1 write_past gp_before -
read_underflow -4 read_past gp_before -"
hl gp_abort --guard-pages=1 --guard-pages-abort -- gp
if [ "$ST" -eq 139 ] && ! grep -q "gp done" "$WORK/gp_abort.stdout"; then
    pass "guard pages abort: the first fault ends the program by SIGSEGV (status 139)"
else
    fail "guard pages abort" "status $ST, output $(tr '\n' '|' <"$WORK/gp_abort.stdout")"
fi
same "guard pages abort: the fault was reported first" "$(stacks "$J")" "overflow 96 write_past gp -"
hl gp_threads --guard-pages=1 -- gp_threads
expect "guard pages: 4 threads faulting at once go on" 0 "gp_threads done"
same "guard pages: each thread's fault at its own instruction" "$(stacks "$J" | sort | uniq -c | sed 's/^ *//')" \
"4 overflow 64 write_past gp_thread -
4 read_after_free 0 read_freed gp_thread released"
hl gp_own --guard-pages=1 -- gp_own
expect "guard pages: the program's own SIGSEGV handler runs" 0 "own handler ran"
expect "guard pages: ... and again after a guard page fault" 0 "own handler ran again"
same "guard pages: only the guard page's fault is reported" "$(stacks "$J")" \
    "overflow 32 write_past gp_own -"
{ st=$(cd "$WORK" && timeout "$TIMEOUT" "$HL" run -q --guard-pages=1 -o "$WORK/segv.hl" -- \
    "$BUILD/programs/exit_segv" >/dev/null 2>&1; echo $?); } 2>/dev/null
if [ "$st" -eq 139 ]; then
    pass "guard pages: a program's own crash still ends it by SIGSEGV (status 139)"
else
    fail "guard pages: exit_segv" "status $st, expected 139"
fi
hl gp_sampled --guard-pages=1/1000 -- threads
expect "guard pages 1/1000: 4 threads" 0 "threads done"
check "guard pages 1/1000: no error, every block seen" "$J" "errors == []" "calls['free'] >= 80000"
hl gp_all_threads --guard-pages=1 -- threads
expect "guard pages 1 (pool used up and reused): 4 threads" 0 "threads done"
check "guard pages 1: threads: no error" "$J" "errors == []"
hl gp_realloc --guard-pages=1 -- realloc
expect "guard pages: realloc in every direction" 0 "realloc contents kept"
hl gp_aligned --guard-pages=1 -- aligned
expect "guard pages: aligned as asked" 0 "aligned as asked"

# ================================================================================================
# 3d. Guard sites: only allocations through the named functions go on guard pages
# ================================================================================================
# alloc_top FILE: the allocation stack's innermost function of each error
alloc_top() {
    python3 -c '
import json, sys
for e in json.load(open(sys.argv[1]))["errors"]:
    print(e["kind"], (e.get("alloc_stack") or [{}])[0].get("function"))' "$1" 2>&1
}
hl gs_bad --guard-sites='^site_bad$' -- sites
expect "guard sites: the program goes on" 0 "sites done"
same "guard sites = the overflowing function: its write faults, that function at the top" \
    "$(stacks "$J")" "overflow 48 site_bad sites_mode -"
hl gs_good --guard-sites='^site_good$' -- sites
expect "guard sites = the other function: the program goes on" 0 "sites done"
same "guard sites = the other function: its read past the end faults; the bad block is not on a guard page, its overflow found at its release" \
    "$(stacks "$J")" "read_overflow 48 read_past site_good -
overflow 48 release sites_mode -"
same "guard sites = the other function: the overflow at release names site_bad's block" \
    "$(alloc_top "$J")" "read_overflow site_good
overflow site_bad"
hl gs_rate --guard-pages=1/2 --guard-sites='^site_(good|bad)$' -- sites
same "guard sites with --guard-pages=1/2: one in two of the matching allocations (the first)" \
    "$(stacks "$J")" "read_overflow 48 read_past site_good -
overflow 48 release sites_mode -"
hl gs_threads --guard-sites='^gp_thread$' -- gp_threads
expect "guard sites in 4 threads at once: the program goes on" 0 "gp_threads done"
same "guard sites in 4 threads at once: each thread's fault at its own instruction" \
    "$(stacks "$J" | sort | uniq -c | sed 's/^ *//')" \
"4 overflow 64 write_past gp_thread -
4 read_after_free 0 read_freed gp_thread released"
hl gs_dlopen --guard-sites=plugin_site_overflow -- sites_dlopen
expect "guard sites in a dlopen'd library: the program goes on" 0 "sites_dlopen done"
same "guard sites in a dlopen'd library: its write faults, at its instruction" \
    "$(stacks "$J")" "overflow 48 plugin_site_overflow sites_dlopen -"
# A plugin found through the program's RUNPATH ($ORIGIN/plugins), dlopen'd by its bare name
mkdir -p "$WORK/rp/plugins" && cp "$BUILD/programs/libplugin.so" "$WORK/rp/plugins/"
cat >"$WORK/rp/main.c" <<'EOF'
#include <dlfcn.h>
#include <unistd.h>
int main(void) {
    void* h = dlopen("libplugin.so", RTLD_NOW);
    int (*overflow)(void) = h ? (int (*)(void))dlsym(h, "plugin_site_overflow") : 0;
    return overflow && overflow() == 1 && write(1, "rp done\n", 8) == 8 ? 0 : 1;
}
EOF
if ${CC:-cc} -O2 -g -o "$WORK/rp/main" "$WORK/rp/main.c" -Wl,-rpath,'$ORIGIN/plugins' -ldl 2>"$WORK/rp/cc.err"; then
    (cd "$WORK" && timeout "$TIMEOUT" "$HL" run -q --guard-sites=plugin_site_overflow -o "$WORK/gs_rp.hl" \
        --json "$WORK/gs_rp.json" -- "$WORK/rp/main" >"$WORK/gs_rp.stdout" 2>"$WORK/gs_rp.stderr")
    st=$?
    same "guard sites in a plugin found through RUNPATH \$ORIGIN/plugins: its write faults (status $st)" \
        "$(stacks "$WORK/gs_rp.json") $st" "overflow 48 plugin_site_overflow main - 0"
else
    fail "guard sites through RUNPATH" "cannot build the program: $(head -2 "$WORK/rp/cc.err")"
fi
cp "$PROG" "$WORK/stripped" && strip "$WORK/stripped"
(cd "$WORK" && timeout "$TIMEOUT" "$HL" run -q --guard-sites='^site_bad$' -o "$WORK/gs_stripped.hl" \
    --json "$WORK/gs_stripped.json" -- "$WORK/stripped" sites >/dev/null 2>"$WORK/gs_stripped.stderr")
st=$?
if [ "$st" -eq 0 ] && [ "$(grep -c 'warning: --guard-sites: no function of .* matches' "$WORK/gs_stripped.stderr")" -eq 1 ] &&
    [ "$(stacks "$WORK/gs_stripped.json" | cut -d' ' -f1,2)" = "overflow 48" ]; then
    pass "guard sites in a stripped program: one line says nothing matched; the overflow still found at release"
else
    fail "guard sites, stripped" "status $st; $(head -3 "$WORK/gs_stripped.stderr"); $(stacks "$WORK/gs_stripped.json")"
fi
for bad in '--guard-sites=(' '--guard-sites=a[' '--guard-sites=*x{'; do
    out=$("$HL" run "$bad" -- /bin/true 2>&1)
    st=$?
    if [ "$st" -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q 'not a regular expression' <<<"$out"; then
        pass "run $bad refused in one line: $out"
    else
        fail "run $bad" "status $st: $out"
    fi
done
out=$("$HL" run -q --guard-sites=. -o "$WORK/gs_all.hl" -- "$BUILD/programs/cxx_new_delete" 2>&1 >/dev/null)
st=$?
if [ "$st" -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q 'more than the 4096 the agent holds' <<<"$out"; then
    pass "run --guard-sites=. (libstdc++'s thousands of functions) refused in one line: $out"
else
    fail "run --guard-sites=. with libstdc++" "status $st: $out"
fi
# By hand, the resolved form: the build-id, site_bad's address and size as nm prints them
bid=$(readelf -n "$PROG" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
read -r addr size _ < <(nm -S "$PROG" | awk '$4 == "site_bad" {print $1, $2}')
(cd "$WORK" && timeout "$TIMEOUT" env LD_PRELOAD="$LIB" \
    HEAPLENS_OPTIONS="guard_sites=$bid@$addr+$size:output=gs_hand.hl" "$PROG" sites >/dev/null 2>"$WORK/gs_hand.stderr")
"$HL" report --json "$WORK/gs_hand.json" "$WORK/gs_hand.hl" >/dev/null 2>&1
same "guard_sites by hand, resolved: site_bad's write faults" "$(stacks "$WORK/gs_hand.json")" \
    "overflow 48 site_bad sites_mode -"
(cd "$WORK" && timeout "$TIMEOUT" env LD_PRELOAD="$LIB" HEAPLENS_GUARD_SITES='site_bad' \
    HEAPLENS_OUTPUT=gs_hand2.hl "$PROG" sites >"$WORK/gs_hand2.stdout" 2>"$WORK/gs_hand2.stderr")
st=$?
if [ "$st" -eq 0 ] && grep -qx "sites done" "$WORK/gs_hand2.stdout" &&
    [ "$(grep -c 'ignoring guard_sites in HEAPLENS_GUARD_SITES' "$WORK/gs_hand2.stderr")" -eq 1 ]; then
    pass "HEAPLENS_GUARD_SITES not in the resolved form: one line, the program as without it"
else
    fail "HEAPLENS_GUARD_SITES malformed" "status $st: $(head -3 "$WORK/gs_hand2.stderr")"
fi

# ================================================================================================
# 3c. Leak verdicts, counts and output as without the options (programs with known leaks)
# ================================================================================================
for prog in alloc_basic reach_list reach_interior alloc_aligned; do
    p=$BUILD/programs/$prog
    [ -x "$p" ] || { fail "$prog" "not built"; continue; }
    (cd "$WORK" && timeout "$TIMEOUT" "$HL" run -q -o "$WORK/$prog.plain.hl" \
        --json "$WORK/$prog.plain.json" -- "$p" >"$WORK/$prog.plain.out" 2>/dev/null)
    for opts in "--redzone=16 --paint=alloc:0xAA,free:0xDD" "--hoard=64M" "--guard-pages=1"; do
        n=$prog.$(tr -dc 'a-z0-9' <<<"$opts")
        (cd "$WORK" && timeout "$TIMEOUT" "$HL" run -q $opts -o "$WORK/$n.hl" --json "$WORK/$n.json" \
            -- "$p" >"$WORK/$n.out" 2>/dev/null)
        st=$?
        if [ "$st" -eq 0 ] && cmp -s "$WORK/$prog.plain.out" "$WORK/$n.out"; then
            pass "$prog $opts: output and status as without"
        else
            fail "$prog $opts" "status $st, output $(head -c 200 "$WORK/$n.out")"
        fi
        out=$(python3 "$CHECK" --same "$prog $opts: leak verdicts and counts as without" \
            "$WORK/$prog.plain.json" "$WORK/$n.json" leaks totals.allocations totals.frees \
            totals.bytes_allocated errors 2>&1)
        echo "$out"
        PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
        FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
    done
done

# ================================================================================================
# 4. Other allocators underneath
# ================================================================================================
for lib in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
    path=/usr/lib/x86_64-linux-gnu/$lib
    if [ ! -e "$path" ]; then
        skip "checking under $lib" "$path not installed"
        continue
    fi
    export LD_PRELOAD=$path
    hl "aligned_$lib" --redzone=32 -- aligned
    expect "under $lib: aligned as asked with red zones" 0 "aligned as asked"
    same "under $lib: the aligned block's underrun" "$(fields "$J")" "underflow -1 1 76 a5 aligned -"
    hl "realloc_$lib" --redzone=16 --paint=alloc:0xAA -- realloc
    expect "under $lib: realloc keeps contents" 0 "realloc contents kept"
    native=$(timeout "$TIMEOUT" "$PROG" realloc 2>/dev/null | grep 'realloc(p, 0)')
    same "under $lib: realloc(p, 0) as the allocator answers it natively" \
        "$(grep 'realloc(p, 0)' "$WORK/realloc_$lib.stdout")" "$native"
    hl "uaf_$lib" --hoard=4K -- uaf
    same "under $lib: writes after free" "$(fields "$J")" \
"write_after_free 100 4 77777777 dddddddd uaf_block released
write_after_free 10 1 77 dd uaf_block released"
    hl "gp_$lib" --guard-pages=1 -- gp
    same "under $lib: guard pages" "$(stacks "$J")" "$GP_WANT"
    hl "gs_$lib" --guard-sites='^site_bad$' -- sites
    same "under $lib: guard sites" "$(stacks "$J")" "overflow 48 site_bad sites_mode -"
    hl "threads_$lib" --hoard=1M --redzone=16 -- threads
    expect "under $lib: threads with hoard and red zones" 0 "threads done"
    unset LD_PRELOAD
done

# ================================================================================================
# 5. The settings by hand, and bad values
# ================================================================================================
(cd "$WORK" && timeout "$TIMEOUT" env LD_PRELOAD="$LIB" \
    HEAPLENS_OPTIONS='redzone=16:paint=alloc\:0xAA:output=hand.hl' "$PROG" paint >"$WORK/hand.stdout" 2>"$WORK/hand.stderr")
if grep -qx "new block painted 0xAA" "$WORK/hand.stdout" && "$HL" report --json "$WORK/hand.json" \
    "$WORK/hand.hl" 2>/dev/null; then
    pass "HEAPLENS_OPTIONS redzone= and paint= reach the agent"
else
    fail "HEAPLENS_OPTIONS by hand" "$(cat "$WORK/hand.stdout" "$WORK/hand.stderr" | head -3)"
fi
(cd "$WORK" && timeout "$TIMEOUT" env LD_PRELOAD="$LIB" HEAPLENS_HOARD=4K \
    HEAPLENS_OUTPUT=hand2.hl "$PROG" uaf >/dev/null 2>&1)
"$HL" report --json "$WORK/hand2.json" "$WORK/hand2.hl" >/dev/null 2>&1
check "HEAPLENS_HOARD by hand" "$WORK/hand2.json" "len(errors) == 2"
for bad in --redzone=x --redzone=5000 --paint=foo --paint=alloc:0x100 --paint=alloc:1,alloc:2 \
    --hoard=12Q --hoard=0 --hoard=; do
    out=$("$HL" run "$bad" -- /bin/true 2>&1)
    st=$?
    if [ "$st" -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ]; then
        pass "run $bad refused in one line"
    else
        fail "run $bad" "status $st: $out"
    fi
done

# ================================================================================================
# 6. Against memcheck: the same writes, the same places
# ================================================================================================
# agree MEMCHECK.txt HEAPLENS.json: every write memcheck reports on a heap block ("is N bytes
# before|after|inside a block of size S") lies in the bytes one heaplens error found changed in a
# block of that size, and every heaplens error holds at least one of memcheck's writes.
agree() {
    python3 - "$1" "$2" <<'PY'
import json, re, sys
vg = []
for m in re.finditer(r"is ([0-9,]+) bytes (before|after|inside) a block of size ([0-9,]+)",
                     open(sys.argv[1]).read()):
    n, where, size = int(m[1].replace(",", "")), m[2], int(m[3].replace(",", ""))
    vg.append((size, -n if where == "before" else size + n if where == "after" else n))
ours = [(e["block_size"], e["offset"], e["changed_bytes"])
        for e in json.load(open(sys.argv[2]))["errors"] if "offset" in e]
lost = [w for w in vg if not any(s == w[0] and o <= w[1] < o + n for s, o, n in ours)]
extra = [e for e in ours if not any(s == e[0] and e[1] <= o < e[1] + e[2] for s, o in vg)]
if not vg or lost or extra:
    print("memcheck writes %s, heaplens changes %s: missed %s, not in memcheck %s"
          % (vg, ours, lost, extra))
    sys.exit(1)
print("%d memcheck write(s) in %d heaplens change(s)" % (len(vg), len(ours)))
PY
}
if ! command -v valgrind >/dev/null; then
    skip "memcheck comparison" "valgrind not installed"
else
    for mode in underrun:--redzone=16 overrun:--redzone=16 realloc:--redzone=16 \
        uaf:--hoard=64M; do
        m=${mode%%:*}
        timeout 120 valgrind --tool=memcheck "$PROG" "$m" >/dev/null 2>"$WORK/vg_$m.txt"
        hl "cmp_$m" "${mode#*:}" -- "$m"
        if out=$(agree "$WORK/vg_$m.txt" "$J"); then
            pass "memcheck and heaplens ${mode#*:} agree on $m: $out"
        else
            fail "memcheck vs heaplens on $m" "$out"
        fi
    done
    # Every invalid read or write memcheck reports is a guard page fault heaplens reports, the
    # function memcheck names at the top among heaplens's two innermost frames (memcheck names
    # the caller where the callee is a constprop clone gcc made: read_past.constprop.0)
    hl sites --guard-pages=1 -- sites
    hl sites_dlopen --guard-pages=1 -- sites_dlopen
    for mode in gp:4 gp_before:2 sites:2 sites_dlopen:1; do
        m=${mode%%:*}
        timeout 120 valgrind --tool=memcheck "$PROG" "$m" >/dev/null 2>"$WORK/vg_$m.txt"
        vg=$(grep -A1 'Invalid \(read\|write\)' "$WORK/vg_$m.txt" |
            sed -n 's/.* at 0x[0-9A-F]*: \([a-z_]*\) .*/\1/p' | tr '\n' ' ')
        ours=$(stacks "$WORK/$m.json" | awk '{print $3 "/" $4}' | tr '\n' ' ')
        ok=1
        set -- $ours
        for f in $vg; do
            [ $# -gt 0 ] && { [ "${1%/*}" = "$f" ] || [ "${1#*/}" = "$f" ]; } || ok=0
            [ $# -gt 0 ] && shift
        done
        if [ "$ok" = 1 ] && [ "$(wc -w <<<"$vg")" -eq "${mode#*:}" ] && [ $# -eq 0 ]; then
            pass "$m: memcheck's ${mode#*:} invalid accesses are heaplens --guard-pages's: memcheck [$vg] heaplens [$ours]"
        else
            fail "memcheck vs --guard-pages on $m" "memcheck [$vg] heaplens [$ours]"
        fi
    done
    # memcheck gives aligned_alloc(64, 64) the alignment's slack before the block as its own:
    # the byte written just before it is not reported; heaplens's red zone catches it
    timeout 120 valgrind --tool=memcheck "$PROG" aligned >/dev/null 2>"$WORK/vg_aligned.txt"
    hl cmp_aligned --redzone=16 -- aligned
    if grep -q 'ERROR SUMMARY: 0 errors' "$WORK/vg_aligned.txt" &&
        [ "$(fields "$J")" = "underflow -1 1 76 a5 aligned -" ]; then
        pass "aligned: memcheck misses the byte before an aligned_alloc(64) block, heaplens finds it"
    else
        fail "aligned against memcheck" "$(grep 'ERROR SUMMARY' "$WORK/vg_aligned.txt"); $(fields "$J")"
    fi
fi
finish
