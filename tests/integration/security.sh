#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# security.sh BUILD_DIR - what heaplens creates and where it writes (issue 11, items 9 to 12):
#   - a trace that cannot be written (a full disk, /dev/full) leaves no file and is told in one
#     line that names the file and the error; nothing is ever created beside a device;
#   - the session index lives in a private directory of the run, which is removed at its end and
#     never made again by a process that outlives the run (a daemon's late exec), nor used when
#     another user made it, or when group or others may enter it;
#   - no report output (run, report, diff, html) follows a symbolic link another user planted in
#     a world-writable sticky directory, or writes another user's file there;
#   - traces are 0600; report outputs 0644 less the umask.
# The cases with another user need root (setpriv to uid 65534) and say SKIP otherwise; the full
# disk is a 64 KiB tmpfs in a private mount namespace. One line per check, "PASS name" or
# "FAIL name: reason"; the last line is "N passed, N failed"; exit 1 when anything failed.
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
AGENT=$BUILD/libheaplens.so
PROGS=$BUILD/programs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-security.XXXXXX")
chmod 755 "$WORK" # another user must reach the shared directory inside
PASSED=0
FAILED=0
TIMEOUT=30 # seconds per command; each takes well under one normally
OTHER=65534 # the other user: nobody
unset XDG_RUNTIME_DIR HEAPLENS_OPTIONS HEAPLENS_OUTPUT HEAPLENS_SESSION
umask 022

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }
finish() {
    if [ "$FAILED" -eq 0 ]; then rm -rf "$WORK"; else echo "# outputs of every case kept in $WORK"; fi
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
    exit $?
}
ok() { # NAME REASON-IF-NOT COMMAND...: pass when the command succeeds
    local name=$1 reason=$2
    shift 2
    if "$@"; then pass "$name"; else fail "$name" "$reason"; fi
}

[ -x "$HL" ] && [ -f "$AGENT" ] || { fail setup "$HL or $AGENT missing (make all)"; finish; }
for p in alloc_basic fork_child security_late_exec; do
    [ -x "$PROGS/$p" ] || { fail setup "$PROGS/$p missing (make the test programs)"; finish; }
done

IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1
as_other() { setpriv --reuid=$OTHER --regid=$OTHER --clear-groups "$@"; }
HAS_OTHER=0
[ $IS_ROOT = 1 ] && command -v setpriv >/dev/null && as_other true 2>/dev/null && HAS_OTHER=1

# The lines of FILE that are heaplens's own messages (not the ==heaplens== report).
messages() { grep -v '^==heaplens==' "$1"; }
# one_line NAME FILE REGEX: FILE holds exactly one message, and it matches REGEX.
one_line() {
    local n
    n=$(messages "$2" | wc -l)
    if [ "$n" = 1 ] && messages "$2" | grep -Eq -- "$3"; then
        pass "$1"
    else
        fail "$1" "$n lines, wanted one matching '$3': $(head -c 400 "$2" | tr '\n' '|')"
    fi
}
# peek FILE: its first bytes, on one line, for a reason.
peek() { head -c 100 "$1" 2>&1 | LC_ALL=C tr -cd '[:print:]\n' | tr '\n' ' '; }
# gone PATH: a path was given, and nothing is there.
gone() { [ -n "$1" ] && [ ! -e "$1" ] && [ ! -L "$1" ]; }
# wait_gone PID: until the process has ended (at most 20 s).
wait_gone() {
    local i=0
    while [ $i -lt 200 ] && [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; do
        sleep 0.1
        i=$((i + 1))
    done
}
# hl_run DIR ARGS...: heaplens ARGS in DIR; stdout, stderr and status in DIR/{stdout,stderr,status}.
hl_run() {
    local d=$1
    shift
    mkdir -p "$d"
    (cd "$d" && timeout -k 5 $TIMEOUT "$HL" "$@" >"$d/stdout" 2>"$d/stderr" </dev/null)
    echo $? >"$d/status"
}

# ================================================================================================
# 9. A trace that cannot be written
# ================================================================================================
# full_disk NAME COMMAND...: COMMAND in a full 64 KiB tmpfs (cwd), in a private mount namespace.
# Leaves $WORK/NAME/{stdout,stderr,status,listing} (listing: what the disk holds after).
NS=()
if [ $IS_ROOT = 1 ] && unshare -m true 2>/dev/null; then NS=(unshare -m); elif unshare -rm true 2>/dev/null; then NS=(unshare -rm); fi
full_disk() {
    local name=$1
    shift
    local d=$WORK/$name
    mkdir -p "$d/disk"
    "${NS[@]}" sh -c 'd=$1; t=$2; shift 2
        mount -t tmpfs -o size=64k tmpfs "$d/disk" || { echo mount >"$d/status"; exit; }
        dd if=/dev/zero of="$d/disk/fill" bs=4k 2>/dev/null
        cd "$d/disk" && timeout -k 5 "$t" "$@" >"$d/stdout" 2>"$d/stderr" </dev/null
        echo $? >"$d/status"
        ls -A "$d/disk" | tr "\n" " " >"$d/listing"' sh "$d" $TIMEOUT "$@"
}
if [ ${#NS[@]} -gt 0 ]; then
    for variant in default named agent; do
        case $variant in
        default) full_disk full_$variant "$HL" run -- "$PROGS/alloc_basic"; name='heaplens\.alloc_basic\.[0-9]+\.hl' ;;
        named) full_disk full_$variant "$HL" run -o t.hl -- "$PROGS/alloc_basic"; name='/t\.hl' ;;
        agent) full_disk full_$variant env LD_PRELOAD="$AGENT" HEAPLENS_OUTPUT=t.%p.hl "$PROGS/alloc_basic"; name='t\.[0-9]+\.hl' ;;
        esac
        d=$WORK/full_$variant
        if [ "$(cat "$d/status")" = mount ]; then
            skip "full disk ($variant)" "cannot mount a tmpfs here"
            continue
        fi
        ok "full disk ($variant): the program's exit status is kept" "got $(cat "$d/status")" [ "$(cat "$d/status")" = 0 ]
        ok "full disk ($variant): the program ran to its end" "stdout: $(head -c 200 "$d/stdout")" grep -q "alloc_basic done" "$d/stdout"
        ok "full disk ($variant): no file is left behind" "the disk holds: $(cat "$d/listing")" [ "$(cat "$d/listing")" = "fill " ]
        one_line "full disk ($variant): one line names the file and the error" "$d/stderr" "^heaplens: .*$name: No space left on device"
        ok "full disk ($variant): set-user-ID programs are not blamed" "$(cat "$d/stderr")" bash -c "! grep -q set-user-ID '$d/stderr'"
    done
else
    skip "full disk" "no private mount namespace here (unshare -m / unshare -rm)"
fi

# A device at the trace's name: refused, never removed, nothing created beside it. A private copy
# of /dev/full (same device numbers), so that a regression harms only the copy.
if [ $IS_ROOT = 1 ] && mknod "$WORK/fulldev" c 1 7 2>/dev/null; then
    hl_run "$WORK/dev_cli" run -o "$WORK/fulldev" -- "$PROGS/alloc_basic"
    d=$WORK/dev_cli
    ok "run -o DEVICE: the device stays a device" "$(ls -l "$WORK/fulldev" 2>&1)" [ -c "$WORK/fulldev" ]
    ok "run -o DEVICE: nothing is created beside it" "$(ls "$WORK" | grep fulldev. | tr '\n' ' ')" bash -c "! ls '$WORK' | grep -q '^fulldev\.'"
    ok "run -o DEVICE: refused before the program runs (exit 2)" "exit $(cat "$d/status")" [ "$(cat "$d/status")" = 2 ]
    one_line "run -o DEVICE: one line says what is there" "$d/stderr" "^heaplens: $WORK/fulldev: .*character device"

    d=$WORK/dev_agent
    mkdir -p "$d"
    (cd "$d" && timeout -k 5 $TIMEOUT env HEAPLENS_OUTPUT="$WORK/fulldev" LD_PRELOAD="$AGENT" "$PROGS/alloc_basic" >"$d/stdout" 2>"$d/stderr" </dev/null)
    st=$?
    ok "HEAPLENS_OUTPUT=DEVICE: the program's exit status is kept" "got $st" [ $st = 0 ]
    ok "HEAPLENS_OUTPUT=DEVICE: nothing is created beside it" "$(ls "$WORK" | grep fulldev. | tr '\n' ' ')" bash -c "! ls '$WORK' | grep -q '^fulldev\.'"
    one_line "HEAPLENS_OUTPUT=DEVICE: one line names the file and what is there" "$d/stderr" "^heaplens: .*$WORK/fulldev: it is a character device"

    # The real /dev/full, through the agent only (the CLI case above is the same code).
    if [ -c /dev/full ] && [ ! -e /dev/full.1 ]; then
        (timeout -k 5 $TIMEOUT env HEAPLENS_OUTPUT=/dev/full LD_PRELOAD="$AGENT" "$PROGS/alloc_basic" >/dev/null 2>"$WORK/devfull.stderr" </dev/null)
        if [ -e /dev/full.1 ]; then
            rm -f /dev/full.1
            fail "HEAPLENS_OUTPUT=/dev/full: no /dev/full.1" "/dev/full.1 was created"
        else
            pass "HEAPLENS_OUTPUT=/dev/full: no /dev/full.1"
        fi
    fi
else
    skip "trace named as a device" "needs root (mknod)"
fi

# ================================================================================================
# 10. The session index
# ================================================================================================
# Where it lives while the program runs, as the program sees it.
SHOW_SESSION='S=${HEAPLENS_OPTIONS##*:session=}; stat -c "%a %u %F" "${S%/*}" "$S"; echo "$S"'
me=$(id -u)
mkdir -p "$WORK/tmp" "$WORK/xdg" "$WORK/xdg_open"
chmod 700 "$WORK/xdg"
chmod 755 "$WORK/xdg_open"
for variant in tmpdir xdg xdg_open; do
    d=$WORK/session_$variant
    case $variant in
    tmpdir) env=(TMPDIR=$WORK/tmp); where=$WORK/tmp ;;
    xdg) env=(TMPDIR=$WORK/tmp XDG_RUNTIME_DIR=$WORK/xdg); where=$WORK/xdg ;;
    xdg_open) env=(TMPDIR=$WORK/tmp XDG_RUNTIME_DIR=$WORK/xdg_open); where=$WORK/tmp ;; # not private: not used
    esac
    mkdir -p "$d"
    (cd "$d" && env "${env[@]}" timeout -k 5 $TIMEOUT "$HL" run -q -- /bin/sh -c "$SHOW_SESSION" >"$d/stdout" 2>"$d/stderr" </dev/null)
    dir_line=$(sed -n 1p "$d/stdout")
    file_line=$(sed -n 2p "$d/stdout")
    index=$(sed -n 3p "$d/stdout")
    ok "session ($variant): a directory of the user's, mode 700" "got '$dir_line'" [ "$dir_line" = "700 $me directory" ]
    ok "session ($variant): the index is mode 600" "got '$file_line'" [ "${file_line%% *}" = 600 ]
    ok "session ($variant): under $where" "got '$index'" [ "${index#"$where"/heaplens-}" != "$index" ]
    ok "session ($variant): removed when the run ends" "$(ls -la "${index%/*}" 2>&1 | head -3)" gone "${index%/*}"
done

# late_exec NAME [OPTIONS...]: security_late_exec under heaplens run; the run ends, then its
# child execs. Between the two, $PLANT (a shell command) runs with S set to the session index the
# run used. Leaves S, and the run's directory D.
late_exec() {
    local name=$1
    shift
    D=$WORK/$name
    mkdir -p "$D"
    rm -f "$D/go"
    (cd "$D" && TMPDIR=$WORK/shared_tmp timeout -k 5 $TIMEOUT "$HL" run -q "$@" -- "$PROGS/security_late_exec" "$D/go" \
        >"$D/stdout" 2>"$D/stderr" </dev/null)
    S=$(sed -n 's/^session=//p' "$D/stdout")
    local child
    child=$(sed -n 's/^child=//p' "$D/stdout")
    [ -n "$S" ] && [ -n "$child" ] || { fail "$name" "no session or child: $(cat "$D/stdout" "$D/stderr" | head -c 300)"; return 1; }
    ok "$name: the run's directory is gone when heaplens ends" "${S%/*} is there" gone "${S%/*}"
    S=$S bash -c "$PLANT"
    touch "$D/go"
    wait_gone "$child"
}
mkdir -p "$WORK/shared_tmp"
chmod 1777 "$WORK/shared_tmp" # as /tmp: anyone may make names there

PLANT=':'
if late_exec late_exec_nothing; then
    ok "late_exec_nothing: the index is not made again by a later exec" "$S is there" [ ! -e "$S" ]
    ok "late_exec_nothing: nor its directory" "${S%/*} is there" [ ! -e "${S%/*}" ]
fi

# The directory made again by the user itself, but open to group and others: not used. (Only
# made when it is not there: never a change to a directory that is.)
PLANT='[ -e "${S%/*}" ] || { mkdir -m 755 "${S%/*}" && : >"$S"; }'
if late_exec late_exec_open_dir; then
    ok "late_exec_open_dir: an index in a directory others may enter is not written" "$(head -c 200 "$S")" [ ! -s "$S" ]
fi

if [ $HAS_OTHER = 1 ]; then
    echo "secret" >"$WORK/secret"
    cp "$WORK/secret" "$WORK/secret.orig"
    # Another user makes the directory again and plants a link to root's file as the index.
    PLANT="as_other() { setpriv --reuid=$OTHER --regid=$OTHER --clear-groups \"\$@\"; }
           as_other mkdir -p \"\${S%/*}\"; as_other ln -sf '$WORK/secret' \"\$S\""
    if late_exec late_exec_planted; then
        ok "late_exec_planted: a link planted at the index by another user is not written through" \
            "$WORK/secret now: $(peek "$WORK/secret")" cmp -s "$WORK/secret" "$WORK/secret.orig"
    fi
else
    skip "late_exec_planted" "needs root and setpriv (another user plants the link)"
fi

# --no-follow: a later image is not traced, even once the run's index is gone.
PLANT=':'
if late_exec late_exec_no_follow --no-follow; then
    ok "late_exec_no_follow: the late image writes no trace" "$(ls "$D" | tr '\n' ' ')" bash -c "! ls '$D' | grep -q '^heaplens\.true\.'"
fi

# ================================================================================================
# 11. Report outputs in a shared directory
# ================================================================================================
base=$WORK/base
hl_run "$base" run -q -o "$base/t.hl" --json "$base/r.json" -- "$PROGS/alloc_basic"
[ -s "$base/t.hl" ] && [ -s "$base/r.json" ] || { fail "setup" "no base trace: $(cat "$base/stderr")"; finish; }
T=$base/t.hl

# output_cases OUT: every report output of run, report, diff and html, to OUT; "NAME|ARGS..."
output_cases() {
    local o=$1
    cat <<EOF
run --json|run -q -o RUNDIR/t.hl --json $o -- $PROGS/alloc_basic
run --html|run -q -o RUNDIR/t.hl --html $o -- $PROGS/alloc_basic
report --json|report -q --json $o $T
report --html|report -q --html $o $T
report --collapsed|report -q --collapsed $o $T
report --flamegraph|report -q --flamegraph $o $T
report --pprof|report -q --pprof $o $T
report --massif|report -q --massif $o $T
diff --json|diff -q --json $o $T $T
diff --html|diff -q --html $o $T $T
html -o|html $base/r.json -o $o
EOF
}
# each_output TAG OUT CHECK [some]: runs every case with output OUT (with "some", one case per
# command: the rest share its code); CHECK NAME DIR is called after each.
SOME_OUTPUTS='run --json|report --pprof|diff --html|html -o'
each_output() {
    local tag=$1 out=$2 check=$3 which=${4:-all} n=0 name args d
    while IFS='|' read -r name args; do
        n=$((n + 1))
        [ "$which" = all ] || grep -qxE "$SOME_OUTPUTS" <<<"$name" || continue
        d=$WORK/out_$(printf '%s' "$tag" | tr -c 'a-zA-Z0-9' _)_$n
        mkdir -p "$d"
        # shellcheck disable=SC2086 # the arguments hold no spaces
        hl_run "$d" ${args//RUNDIR/$d}
        $check "$name: $tag" "$d"
    done < <(output_cases "$out")
}

if [ $HAS_OTHER = 1 ]; then
    SHARED=$WORK/shared
    mkdir -p "$SHARED"
    chmod 1777 "$SHARED"
    echo "secret" >"$WORK/secret"
    cp "$WORK/secret" "$WORK/secret.orig"
    refused() { # NAME DIR: the secret is untouched, one line says why
        ok "$1: the target is untouched" "$WORK/secret now: $(peek "$WORK/secret")" cmp -s "$WORK/secret" "$WORK/secret.orig"
        cp "$WORK/secret.orig" "$WORK/secret"
        one_line "$1: one line says why" "$2/stderr" "^heaplens: $OUT: cannot write .*: not (following|writing)"
    }
    # A link to root's file, planted by another user.
    as_other ln -s "$WORK/secret" "$SHARED/planted"
    OUT=$SHARED/planted
    each_output "planted link" "$OUT" refused
    # A directory link planted by another user, on the way to the output.
    as_other ln -s "$WORK" "$SHARED/dirlink"
    OUT=$SHARED/dirlink/secret
    each_output "planted directory link" "$OUT" refused some
    # Another user's file in the shared directory (protected_regular): not written.
    as_other sh -c "umask 0; echo secret >'$SHARED/theirs'"
    theirs() {
        ok "$1: their file is untouched" "now: $(peek "$SHARED/theirs")" [ "$(cat "$SHARED/theirs")" = secret ]
        one_line "$1: one line says why" "$2/stderr" "^heaplens: $OUT: cannot write .*: not writing to a file that another user"
    }
    OUT=$SHARED/theirs
    each_output "another user's file" "$OUT" theirs some
    # The user's own link in the shared directory, to another user's file.
    echo secret >"$WORK/theirs_elsewhere"
    chown $OTHER "$WORK/theirs_elsewhere"
    chmod 666 "$WORK/theirs_elsewhere"
    ln -s "$WORK/theirs_elsewhere" "$SHARED/mine_to_theirs"
    OUT=$SHARED/mine_to_theirs
    mine_to_theirs() {
        ok "$1: their file is untouched" "now: $(peek "$WORK/theirs_elsewhere")" [ "$(tr -d '\0' <"$WORK/theirs_elsewhere")" = secret ]
        one_line "$1: one line says why" "$2/stderr" "^heaplens: $OUT: cannot write .*: not writing to a file that another user"
    }
    each_output "own link to another user's file" "$OUT" mine_to_theirs some
else
    skip "outputs in a shared directory" "needs root and setpriv (another user plants the links)"
fi

# Ordinary outputs keep working: a new file, an existing one of the user's, the user's own
# link (in a private directory and in the shared one), /dev/null, stdout.
written() { # NAME DIR: exit 0, no message, TARGET written (a new file: 0644 less the umask, 022)
    ok "$1: exit 0" "exit $(cat "$2/status"): $(head -c 300 "$2/stderr")" [ "$(cat "$2/status")" = 0 ]
    ok "$1: written, mode 644" "$TARGET: $(ls -l "$TARGET" 2>&1)" [ -s "$TARGET" -a "$(stat -c %a "$TARGET" 2>&1)" = 644 ]
    ok "$1: no message" "$(head -c 300 "$2/stderr")" bash -c "[ -z \"\$(grep -v '^==heaplens==' '$2/stderr')\" ]"
    rm -f "$TARGET"
}
mkdir -p "$WORK/own"
TARGET=$WORK/own/new.out
each_output "new file" "$TARGET" written
TARGET=$WORK/own/target.out
ln -s target.out "$WORK/own/link"
each_output "own link" "$WORK/own/link" written some
mkdir -p "$WORK/own_shared"
chmod 1777 "$WORK/own_shared"
ln -s "$TARGET" "$WORK/own_shared/link"
each_output "own link in a shared directory" "$WORK/own_shared/link" written some
to_null() { ok "$1: exit 0" "exit $(cat "$2/status"): $(head -c 300 "$2/stderr")" [ "$(cat "$2/status")" = 0 ]; }
each_output "/dev/null" /dev/null to_null some
ok "/dev/null: still a device" "$(ls -l /dev/null)" [ -c /dev/null ]
hl_run "$WORK/stdout_json" report -q --json - "$T"
ok "report --json -: JSON on stdout" "$(head -c 300 "$WORK/stdout_json/stderr")" \
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$WORK/stdout_json/stdout"
# An existing file of the user's is rewritten and keeps its mode.
printf '%0100000d' 0 >"$WORK/own/existing.json"
chmod 640 "$WORK/own/existing.json"
hl_run "$WORK/existing" report -q --json "$WORK/own/existing.json" "$T"
ok "report --json EXISTING: rewritten from the start" "$(head -c 100 "$WORK/own/existing.json")" \
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$WORK/own/existing.json"
ok "report --json EXISTING: keeps its mode" "$(stat -c %a "$WORK/own/existing.json")" [ "$(stat -c %a "$WORK/own/existing.json")" = 640 ]

# ================================================================================================
# 12. Modes
# ================================================================================================
for mask in 022 000; do
    d=$WORK/modes_$mask
    mkdir -p "$d"
    (cd "$d" && umask $mask && timeout -k 5 $TIMEOUT "$HL" run -q -- "$PROGS/fork_child" >"$d/stdout" 2>"$d/stderr" </dev/null)
    modes=$(cd "$d" && stat -c %a heaplens.*.hl 2>/dev/null | sort -u | tr '\n' ' ')
    n=$(cd "$d" && ls heaplens.*.hl 2>/dev/null | wc -l)
    ok "traces are 600 (umask $mask, parent and child)" "$n traces, modes '$modes'" [ "$n $modes" = "2 600 " ]
done
# (0644 under umask 022: the ordinary outputs above.)
TARGET=$WORK/modes_out_077
modes_077() {
    local got
    got=$(stat -c %a "$TARGET" 2>&1)
    ok "$1: mode 600" "got $got" [ "$got" = 600 ]
    rm -f "$TARGET"
}
(umask 077 && each_output "umask 077" "$TARGET" modes_077 some) >"$WORK/modes_077.log"
cat "$WORK/modes_077.log"
PASSED=$((PASSED + $(grep -c '^PASS' "$WORK/modes_077.log")))
FAILED=$((FAILED + $(grep -c '^FAIL' "$WORK/modes_077.log")))

# --- The symbol cache: reports keep what they looked up in a private directory of the user's
# (src/analyze/symcache.h); the same report cold or warm, nothing followed, nothing shared.
SC=$WORK/symcache
mkdir -p "$SC"
(cd "$SC" && timeout -k 5 $TIMEOUT "$HL" run -q -o sc.hl -- "$PROGS/alloc_basic" >/dev/null 2>&1 </dev/null)
json() { # JSON_OUT [ENV...]: the JSON report of sc.hl, with only the cache's environment set
    local out=$1
    shift
    (cd "$SC" && env -u HEAPLENS_SYMBOL_CACHE -u XDG_CACHE_HOME "$@" timeout -k 5 $TIMEOUT \
        "$HL" report -q --json "$out" sc.hl >/dev/null 2>&1)
}
mkdir -p "$SC/home_off" "$SC/home"
json "$SC/off.json" HEAPLENS_SYMBOL_CACHE=off HOME="$SC/home_off"
ok "symbol cache off: nothing made" "$(ls -A "$SC/home_off" 2>&1 | head -3)" [ -z "$(ls -A "$SC/home_off")" ]
json "$SC/none.json" HOME="$SC/no_such_home"
ok "symbol cache: a home that does not exist is not made" "it was" [ ! -e "$SC/no_such_home" ]
json "$SC/cold.json" HOME="$SC/home"
json "$SC/warm.json" HOME="$SC/home"
CD=$SC/home/.cache/heaplens/symbols
same_json() { cmp -s "$SC/off.json" "$SC/cold.json" && cmp -s "$SC/off.json" "$SC/warm.json"; }
ok "symbol cache: the same JSON cold, warm and without it" "differs" same_json
files=$(ls "$CD" 2>/dev/null | wc -l)
modes=$(stat -c %a "$SC/home/.cache" "$SC/home/.cache/heaplens" "$CD" 2>&1 | tr '\n' ' ')
fmodes=$(cd "$CD" 2>/dev/null && stat -c %a -- * 2>/dev/null | sort -u | tr '\n' ' ')
ok "symbol cache: directories 700, files 600" "dirs '$modes', $files files '$fmodes'" \
    [ "$modes" = "700 700 700 " -a "$files" -ge 1 -a "$fmodes" = "600 " ]
# A link planted in place of each file: not read, not written through; replaced by a file.
echo "victim" >"$SC/victim"
for f in "$CD"/*.sym; do ln -sf "$SC/victim" "$f"; done
json "$SC/planted.json" HOME="$SC/home"
ok "symbol cache: planted links neither read nor written through" "victim: $(peek "$SC/victim")" \
    [ "$(cat "$SC/victim")" = victim ]
cmp -s "$SC/off.json" "$SC/planted.json" && pass "symbol cache: planted links, the same JSON" ||
    fail "symbol cache: planted links, the same JSON" "differs"
links=$(find "$CD" -type l | wc -l)
ok "symbol cache: the links replaced by the user's files" "$links links left" [ "$links" = 0 ]
# A directory others may enter is not used: nothing written in it.
mkdir -p "$SC/open/symbols" && chmod 777 "$SC/open/symbols"
json "$SC/open.json" HEAPLENS_SYMBOL_CACHE="$SC/open/symbols"
n=$(ls -A "$SC/open/symbols" | wc -l)
ok "symbol cache: a directory others may enter is not used" "$n files in it" [ "$n" = 0 ]
cmp -s "$SC/off.json" "$SC/open.json" && pass "symbol cache: unused directory, the same JSON" ||
    fail "symbol cache: unused directory, the same JSON" "differs"
# A damaged file (cut short) is passed over and written anew.
for f in "$CD"/*.sym; do truncate -s 20 "$f"; done
json "$SC/cut.json" HOME="$SC/home"
cmp -s "$SC/off.json" "$SC/cut.json" && pass "symbol cache: files cut short, the same JSON" ||
    fail "symbol cache: files cut short, the same JSON" "differs"
small=$(find "$CD" -name '*.sym' -size -21c | wc -l)
ok "symbol cache: files cut short written anew" "$small still short" [ "$small" = 0 ]
# Only what a module's DWARF answered is kept: a program without it (its symbol table names its
# functions) is looked up afresh each time, and its file stays out of the cache.
cp "$PROGS/alloc_basic" "$SC/nodwarf" && strip --strip-debug "$SC/nodwarf"
(cd "$SC" && timeout -k 5 $TIMEOUT ./nodwarf >/dev/null 2>&1; timeout -k 5 $TIMEOUT "$HL" run -q -o nd.hl -- ./nodwarf >/dev/null 2>&1 </dev/null)
mkdir -m 700 "$SC/c2"
for k in 1 2; do
    (cd "$SC" && env -u DEBUGINFOD_URLS HEAPLENS_SYMBOL_CACHE="$SC/c2" timeout -k 5 $TIMEOUT \
        "$HL" report -q --json "nd$k.json" nd.hl >/dev/null 2>&1)
done
bid=$(readelf -n "$SC/nodwarf" 2>/dev/null | awk '/Build ID/ {print $3}')
kept=$(ls "$SC/c2" | grep -c "^${bid:-none}" || true)
ok "symbol cache: a program without DWARF is not kept" "$kept files for build-id '$bid'" \
    [ -n "$bid" -a "$kept" = 0 ]
others=$(ls "$SC/c2" | wc -l)
ok "symbol cache: its libraries with DWARF are" "$others files" [ "$others" -ge 1 ]
cmp -s "$SC/nd1.json" "$SC/nd2.json" && grep -q '"function": "main"' "$SC/nd2.json" &&
    pass "symbol cache: without DWARF, the same JSON cold and warm" ||
    fail "symbol cache: without DWARF, the same JSON cold and warm" "$(grep -c main "$SC/nd2.json") mains"

# --- No debuginfod client unless a server is named (src/analyze/debuginfod_gate.c): a program
# without debug information anywhere is what makes libdw reach for one. The loader's own log
# says what was loaded.
gate_json() { # JSON_OUT LOG [ENV...]: the JSON report of nd.hl, the loader's log of files
    local out=$1 log=$2
    shift 2
    (cd "$SC" && env -u DEBUGINFOD_URLS HEAPLENS_SYMBOL_CACHE=off LD_DEBUG=files "$@" \
        timeout -k 5 $TIMEOUT "$HL" report -q --json "$out" nd.hl >/dev/null 2>"$log")
}
if ldconfig -p 2>/dev/null | grep -q 'libdebuginfod\.so'; then
    gate_json "$SC/gate_off.json" "$SC/gate_off.log"
    n=$(grep -c 'file=libdebuginfod' "$SC/gate_off.log")
    ok "debuginfod: not loaded when no server is named" "$n loads" [ "$n" = 0 ]
    gate_json "$SC/gate_empty.json" "$SC/gate_empty.log" DEBUGINFOD_URLS=
    n=$(grep -c 'file=libdebuginfod' "$SC/gate_empty.log")
    ok "debuginfod: not loaded when DEBUGINFOD_URLS is empty" "$n loads" [ "$n" = 0 ]
    cmp -s "$SC/nd1.json" "$SC/gate_off.json" && pass "debuginfod: not loaded, the same JSON" ||
        fail "debuginfod: not loaded, the same JSON" "differs"
    # A server named (one that refuses at once): the client is loaded and asked, as before.
    mkdir -p "$SC/dcache"
    gate_json "$SC/gate_on.json" "$SC/gate_on.log" DEBUGINFOD_URLS=http://127.0.0.1:1 \
        DEBUGINFOD_CACHE_PATH="$SC/dcache" DEBUGINFOD_TIMEOUT=5
    n=$(grep -c 'file=libdebuginfod' "$SC/gate_on.log")
    ok "debuginfod: loaded when a server is named" "$n loads" [ "$n" -ge 1 ]
    cmp -s "$SC/nd1.json" "$SC/gate_on.json" && pass "debuginfod: asked, the same JSON" ||
        fail "debuginfod: asked, the same JSON" "differs"
else
    echo "SKIP debuginfod: libdebuginfod is not installed here"
fi

finish
