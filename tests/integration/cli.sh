#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cli.sh BUILD_DIR - the command line itself: every subcommand's --help against its option
# parser, --version, and what heaplens leaves in the traced program's environment (LD_PRELOAD and
# HEAPLENS_OPTIONS; nothing at all with --no-follow, for the program and its children), with the
# settings still reaching the agent through that one variable, or through the variables a user
# sets by hand. One line per check: "PASS name" or "FAIL name: reason"; the last line is
# "N passed, N failed"; exit status 1 when anything failed.
set -u

BUILD=$(cd "${1:-build}" && pwd) || { echo "cli.sh: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
AGENT=$BUILD/libheaplens.so
PROGS=$BUILD/programs
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SRC=$ROOT/src/cli
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=60

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
# ok NAME WHY COMMAND...: PASS when COMMAND succeeds, else FAIL with WHY
ok() {
    local name=$1 why=$2
    shift 2
    if "$@"; then pass "$name"; else fail "$name" "$why"; fi
}
[ -x "$HL" ] && [ -f "$AGENT" ] && [ -x "$PROGS/alloc_basic" ] ||
    { fail setup "build $HL, $AGENT and the test programs first"; echo "$PASSED passed, $FAILED failed"; exit 1; }

# ================================================================================================
# 1. --help of every subcommand, against the options its parser takes
# ================================================================================================
# body FILE FUNCTION: the source of FUNCTION's definition in FILE
body() {
    awk -v f="$2" '$0 ~ "^[a-z].*[ *]" f "\\(" && $0 !~ /;$/ {on = 1} on {print} on && /^}/ {exit}' "$1"
}
# parsed CMD: the options CMD's parser compares arguments with (its string literals that are
# options), one a line
parsed() {
    local parts
    case $1 in
    run) parts="cmd_run.c:cmd_run main.c:cli_report_option main.c:cli_is_help" ;;
    report) parts="cmd_report.c:cmd_report cmd_report.c:view_option main.c:cli_report_option main.c:cli_is_help" ;;
    diff) parts="cmd_diff.c:cmd_diff" ;;
    html) parts="cmd_diff.c:cmd_html main.c:cli_is_help" ;;
    memcheck) parts="cmd_memcheck.c:parse_option" ;;
    server) parts="cmd_server.c:cmd_server" ;;
    shell) parts="cmd_shell.c:cmd_shell main.c:cli_is_help" ;;
    attach) parts="cmd_attach.c:cmd_attach main.c:cli_report_option main.c:cli_is_help" ;;
    detach) parts="cmd_attach.c:cmd_detach main.c:cli_report_option main.c:cli_is_help" ;;
    *) parts="" ;;
    esac
    for p in $parts; do body "$SRC/${p%%:*}" "${p#*:}"; done |
        grep -oE '"(-[a-zA-Z]|--[a-zA-Z][a-zA-Z0-9-]*)' | tr -d '"' | sort -u
}
# the commands: the usage lines at the top of heaplens --help
COMMANDS=$("$HL" --help | awk '/^$/ {exit} {print}' | sed -n 's/^ *\(usage:\)\{0,1\} *heaplens \([a-z]*\) .*/\2/p' | sort -u)
ok "heaplens --help names the subcommands run report diff html memcheck server shell attach detach" "got: $(echo $COMMANDS)" \
    [ "$(echo $COMMANDS)" = "attach detach diff html memcheck report run server shell" ]
for c in $COMMANDS; do
    for h in --help -h; do
        "$HL" "$c" "$h" >"$WORK/help.out" 2>"$WORK/help.err"
        st=$?
        ok "heaplens $c $h: status 0, its usage on stdout, nothing on stderr" \
            "status $st; $(head -2 "$WORK/help.out"); $(head -2 "$WORK/help.err")" \
            bash -c "[ $st = 0 ] && head -1 '$WORK/help.out' | grep -q '^usage: heaplens $c ' && [ ! -s '$WORK/help.err' ]"
    done
    "$HL" "$c" --help >"$WORK/$c.help" 2>&1
    opts=$(parsed "$c")
    n=$(wc -l <<<"$opts")
    missing=""
    for o in $opts; do
        grep -qE -- "(^|[^a-zA-Z0-9-])$o([^a-zA-Z0-9-]|$)" "$WORK/$c.help" || missing="$missing $o"
    done
    # the parser was found (a parser that takes fewer options than this would be a broken read)
    ok "heaplens $c --help mentions each of the $n options its parser takes" "not mentioned:$missing" \
        [ "$n" -ge 3 ] && [ -z "$missing" ]
done
# The man page: each command's section (and the description, which says every command answers
# -h and --help) names every option its parser takes; run's takes report's too.
if command -v man >/dev/null 2>&1; then
    MANWIDTH=1000 man -l "$ROOT/docs/heaplens.1" >"$WORK/man.txt" 2>/dev/null
    for c in $COMMANDS; do
        C=$(tr a-z A-Z <<<"$c")
        sections="DESCRIPTION $C"
        [ "$c" = run ] && sections="$sections REPORT"
        for sec in $sections; do awk -v s="$sec" '/^[A-Z]/ {on = ($0 == s)} on' "$WORK/man.txt"; done >"$WORK/man.$c"
        missing=""
        for o in $(parsed "$c"); do
            grep -qE -- "(^|[^a-zA-Z0-9-])$o([^a-zA-Z0-9-]|$)" "$WORK/man.$c" || missing="$missing $o"
        done
        ok "heaplens(1), section $C: every option of heaplens $c" "not there:$missing" \
            [ -s "$WORK/man.$c" ] && [ -z "$missing" ]
    done
else
    fail man "man is not installed"
fi
# bash completion: every command, and after it every option its parser takes
complete_words() { # COMP_WORD...: what _heaplens offers for the last word, one a line
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _heaplens; printf "%s\n" "${COMPREPLY[@]}"' \
        _ "$ROOT/docs/heaplens.bash" "$@" 2>/dev/null
}
got=$(complete_words heaplens "" | grep -v '^-' | sort | tr '\n' ' ')
ok "bash completion: the commands heaplens --help lists" "offers '$got'" [ "$got" = "$(echo $COMMANDS) " ]
for c in $COMMANDS; do
    offered=$(complete_words heaplens "$c" -)
    missing=""
    for o in $(parsed "$c"); do
        grep -qE -- "^$o(=.*)?$" <<<"$offered" || missing="$missing $o"
    done
    ok "bash completion: every option of heaplens $c" "not offered:$missing" [ -z "$missing" ]
done
ok "heaplens help, heaplens --help: status 0" "" bash -c "'$HL' help >/dev/null && '$HL' --help >/dev/null"
"$HL" >"$WORK/none.out" 2>"$WORK/none.err"
st=$?
ok "heaplens alone: the usage on stderr, status 2" "status $st" \
    bash -c "[ $st = 2 ] && [ ! -s '$WORK/none.out' ] && grep -q '^usage: heaplens run' '$WORK/none.err'"
"$HL" frobnicate >"$WORK/bad.out" 2>"$WORK/bad.err"
st=$?
ok "an unknown command: one line, status 2" "status $st; $(cat "$WORK/bad.err")" \
    bash -c "[ $st = 2 ] && [ \$(wc -l <'$WORK/bad.err') = 1 ] && grep -q \"unknown command 'frobnicate'\" '$WORK/bad.err'"
"$HL" report --summary --help >"$WORK/late.out" 2>&1
ok "heaplens report --summary --help: the help, status 0" "$(head -2 "$WORK/late.out")" \
    grep -q '^usage: heaplens report ' "$WORK/late.out"

# --version: the version the man page names too
v=$("$HL" --version 2>&1)
st=$?
man_v=$(sed -n 's/^\.TH .*"heaplens \([0-9.]*\)".*/\1/p' "$ROOT/docs/heaplens.1")
ok "heaplens --version: status 0, 'heaplens $man_v' as the man page says" "status $st, '$v'" \
    [ $st = 0 ] && [ "$v" = "heaplens $man_v" ]
ok "heaplens memcheck --version: as valgrind's, 'heaplens-$man_v'" "'$("$HL" memcheck --version 2>&1)'" \
    [ "$("$HL" memcheck --version 2>&1)" = "heaplens-$man_v (memcheck's command line)" ]

# ================================================================================================
# 2. The program's environment
# ================================================================================================
# What LD_PRELOAD names: the agents by the loader's $PLATFORM when they are built that way
PRELOADED=$AGENT
[ -e "$(dirname "$AGENT")/agents/$(uname -m)/libheaplens.so" ] && PRELOADED="$(dirname "$AGENT")/agents/\$PLATFORM/libheaplens.so"
E=(env -i PATH=/usr/bin:/bin HOME=/nonexistent A=1 B=x:y)
cd "$WORK" || exit 1
# added NAME FILE_WITHOUT FILE_WITH: the lines only FILE_WITH has, with its value cut at '=' for
# HEAPLENS_OPTIONS (its paths change each run); in ENV_DIFF
envdiff() {
    diff "$1" "$2" | sed -n 's/^> //p; s/^< /-/p' | sed 's/^\(HEAPLENS_OPTIONS=\).*/\1.../'
}
"${E[@]}" env >plain.env
"${E[@]}" "$HL" run -q -o "$WORK/follow.hl" -- env >follow.env 2>follow.err
got=$(envdiff plain.env follow.env)
ok "heaplens run -- env: env's output and two lines more, LD_PRELOAD and HEAPLENS_OPTIONS" "$got" \
    [ "$got" = $'LD_PRELOAD='"$PRELOADED"$'\nHEAPLENS_OPTIONS=...' ]
ok "heaplens run -- env: traced" "$(cat follow.err)" [ -s "$WORK/follow.hl" ]

"${E[@]}" "$HL" run -q -o "$WORK/nofollow.hl" --no-follow -- env >nofollow.env 2>nofollow.err
ok "heaplens run --no-follow -- env: exactly env's output" "$(envdiff plain.env nofollow.env)" \
    cmp -s plain.env nofollow.env
ok "heaplens run --no-follow -- env: traced all the same" "$(cat nofollow.err)" [ -s "$WORK/nofollow.hl" ]

# the user's own preload stays, before and after
"${E[@]}" LD_PRELOAD=libm.so.6 env >plain_pre.env
"${E[@]}" LD_PRELOAD=libm.so.6 "$HL" run -q -o "$WORK/pre.hl" -- env >pre.env 2>&1
got=$(envdiff plain_pre.env pre.env)
ok "an LD_PRELOAD of the user's: the agent goes first in it" "$got" \
    [ "$got" = $'-LD_PRELOAD=libm.so.6\nLD_PRELOAD='"$PRELOADED"$':libm.so.6\nHEAPLENS_OPTIONS=...' ]
"${E[@]}" LD_PRELOAD=libm.so.6 "$HL" run -q -o "$WORK/prenf.hl" --no-follow -- env >prenf.env 2>&1
ok "an LD_PRELOAD of the user's, --no-follow: it is as the user set it" "$(envdiff plain_pre.env prenf.env)" \
    cmp -s plain_pre.env prenf.env

# children: a shell runs env. Traced with the shell they see what it saw; not traced, nothing.
mkdir -p kids_follow kids_nofollow
"${E[@]}" sh -c 'env; true' >kids_plain.env
"${E[@]}" "$HL" run -q -o "$WORK/kids_follow/t.%p.hl" -- sh -c 'env; true' >kids_follow.env 2>&1
got=$(envdiff kids_plain.env kids_follow.env | sort)
ok "a child of a traced program: LD_PRELOAD and HEAPLENS_OPTIONS, and traced" \
    "$got; $(ls kids_follow | wc -l) traces" \
    [ "$got" = $'HEAPLENS_OPTIONS=...\nLD_PRELOAD='"$PRELOADED" ] && [ "$(ls kids_follow | wc -l)" = 2 ]
"${E[@]}" "$HL" run -q -o "$WORK/kids_nofollow/t.%p.hl" --no-follow -- sh -c 'env; true' >kids_nofollow.env 2>&1
ok "a child under --no-follow: exactly the environment it has without heaplens" \
    "$(envdiff kids_plain.env kids_nofollow.env)" cmp -s kids_plain.env kids_nofollow.env
ok "a child under --no-follow: not traced (one trace, the shell's)" "$(ls kids_nofollow)" \
    [ "$(ls kids_nofollow | wc -l)" = 1 ]
# an LD_PRELOAD too long to rewrite in the agent's memory: it stays, with HEAPLENS_OPTIONS, so
# the children's agents know not to trace; one line says so, from the program's agent only
mkdir -p long
LONG=$(printf 'libm.so.6:%.0s' $(seq 1000))
got=$("${E[@]}" LD_PRELOAD="$LONG" "$HL" run -q --no-follow -o "$WORK/long/t.%p.hl" -- sh -c 'env | grep -c "^HEAPLENS_OPTIONS="; true' 2>long.err)
ok "--no-follow, LD_PRELOAD too long to rewrite: kept, children untraced, one line" \
    "$got; $(ls long | wc -l) traces; $(cat long.err)" \
    bash -c "[ '$got' = 1 ] && [ \$(ls '$WORK/long' | wc -l) = 1 ] && [ \$(wc -l <'$WORK/long.err') = 1 ] &&
        grep -q 'LD_PRELOAD is too long' '$WORK/long.err'"
# the traced program's own reads of its variables, after the agent took its own out
got=$("${E[@]}" "$HL" run -q --no-follow -o "$WORK/getenv.hl" -- sh -c 'echo "$A $B ${HEAPLENS_OPTIONS-unset} ${LD_PRELOAD-unset}"' 2>&1)
ok "--no-follow: the program reads its own variables as before" "$got" [ "$got" = "1 x:y unset unset" ]

# The settings still reach the agent: a trace name with ':' and '\' in it (quoted in
# HEAPLENS_OPTIONS), and -d / --no-scan / --sample-interval read back from the reports. (The
# session index, -o's %p, --guard, --no-release-stacks and --no-follow are checked by run.sh.)
mkdir -p 'odd:dir\x'
"$HL" run -q -o "$WORK/odd:dir\\x/t:1.hl" -- "$PROGS/alloc_basic" >/dev/null 2>odd.err
ok "a trace name with ':' and '\\' reaches the agent" "$(ls 'odd:dir\x'); $(cat odd.err)" [ -s 'odd:dir\x/t:1.hl' ]
maxdepth() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(max([len(r.get('stack') or []) for r in d['leak_records']] or [0]), d['scanned'])" "$1"; }
"$HL" run -q -d 1 --no-scan --json "$WORK/d1.json" -o "$WORK/d1.hl" -- "$PROGS/alloc_basic" >/dev/null 2>&1
got=$(maxdepth "$WORK/d1.json" 2>&1)
ok "run -d 1 --no-scan: one frame per stack, no scan" "$got" [ "$got" = "1 False" ]
# --sample-interval: a program whose resident size grows every 5 ms for 0.6 s; the RSS samples
# tell the period apart (a sample every 10 ms by default, every 150 ms when told)
cat >grow.c <<'EOF'
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    for (int i = 0; i < 120; i++) {
        char* p = mmap(NULL, 1 << 18, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED)
            memset(p, 1, 1 << 18);
        usleep(5000);
    }
    return 0;
}
EOF
if ${CC:-cc} -O1 -o grow grow.c 2>cc.err; then
    rss_values() {
        "$HL" run -q --sample-interval="$1" -o "$WORK/grow$1.hl" -- ./grow >/dev/null 2>&1
        "$HL" report --timeline --json - "$WORK/grow$1.hl" 2>/dev/null |
            python3 -c "import json,sys; print(len({p['rss_bytes'] for p in json.load(sys.stdin)['timeline']['points']}))"
    }
    fast=$(rss_values 10)
    slow=$(rss_values 150)
    ok "--sample-interval reaches the agent: $slow RSS values at 150 ms, $fast at 10 ms" "" \
        [ -n "$slow" ] && [ -n "$fast" ] && [ "$slow" -le 8 ] && [ "$fast" -ge $((slow * 3)) ]
else
    fail sample-interval "cannot compile a test program: $(head -3 cc.err)"
fi

# By hand: the agent's variables, one each (README), or HEAPLENS_OPTIONS; the latter wins.
mkdir -p hand
"${E[@]}" LD_PRELOAD="$AGENT" HEAPLENS_OUTPUT="$WORK/hand/each.hl" HEAPLENS_DEPTH=2 "$PROGS/alloc_basic" >/dev/null 2>&1
"$HL" report -q --json "$WORK/hand/each.json" "$WORK/hand/each.hl" >/dev/null 2>&1
ok "by hand, HEAPLENS_OUTPUT and HEAPLENS_DEPTH: the trace there, 2 frames per stack" \
    "$(ls hand)" [ "$(maxdepth "$WORK/hand/each.json" 2>&1)" = "2 True" ]
"${E[@]}" LD_PRELOAD="$AGENT" HEAPLENS_DEPTH=5 HEAPLENS_OPTIONS="depth=1:scan=0:output=$WORK/hand/one.hl" \
    "$PROGS/alloc_basic" >/dev/null 2>&1
"$HL" report -q --json "$WORK/hand/one.json" "$WORK/hand/one.hl" >/dev/null 2>&1
ok "by hand, HEAPLENS_OPTIONS over HEAPLENS_DEPTH: 1 frame, no scan" "$(ls hand)" \
    [ "$(maxdepth "$WORK/hand/one.json" 2>&1)" = "1 False" ]
want=$("$PROGS/alloc_basic" 2>/dev/null; echo "status $?")
got=$("${E[@]}" LD_PRELOAD="$AGENT" HEAPLENS_OPTIONS="depth=x:colour=blue:output=$WORK/hand/bad.hl" \
    "$PROGS/alloc_basic" 2>"$WORK/hand/bad.err"; echo "status $?")
ok "by hand, bad settings: one line each, the program as without them, traced with the rest" \
    "$(cat hand/bad.err)" bash -c "[ '$got' = '$want' ] && [ -s '$WORK/hand/bad.hl' ] &&
        [ \$(grep -c '^heaplens: ignoring' '$WORK/hand/bad.err') = 2 ] && [ \$(wc -l <'$WORK/hand/bad.err') = 2 ]"
# started by hand with the agent's file name (found on the library path) and no_follow: taken out
mkdir -p hand/lib
cp "$AGENT" hand/lib/
"${E[@]}" LD_LIBRARY_PATH="$WORK/hand/lib" LD_PRELOAD="libheaplens.so:libm.so.6" HEAPLENS_OUTPUT="$WORK/hand/nf.hl" \
    HEAPLENS_NO_FOLLOW=1 env >hand/nf.env 2>/dev/null
got=$(grep -E '^(LD_PRELOAD|HEAPLENS_)' hand/nf.env)
ok "by hand, HEAPLENS_NO_FOLLOW=1: the agent's name and variables out of the environment, the rest kept" \
    "$got" bash -c "[ '$got' = 'LD_PRELOAD=libm.so.6' ] && [ -s '$WORK/hand/nf.hl' ]"

echo "$PASSED passed, $FAILED failed"
[ $FAILED = 0 ]
