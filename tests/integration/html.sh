#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# html.sh BUILD_DIR - the HTML report and `heaplens diff`: pages written by `run --html`,
# `report --html`, `html` (from a JSON report) and `diff --html` are checked for being
# self-contained and carrying their JSON intact, then rendered in headless Chromium
# (html_check.py, DevTools protocol) where the chart, flame graph (click to zoom, reset), leaks,
# histogram, address maps and top call sites table must be drawn; the page of a trace of 200k
# distinct stacks must stay under 10 MB and draw in under 2 s. The diff of two runs of one
# program with different arguments must put the site that grew first, in text, JSON and HTML. The
# heap errors of the checking options (overflow, underflow, write and read after free, invalid
# access) must each be listed with their stacks.
# One line per check: "PASS name" / "FAIL name: reason" / "SKIP name: reason"; the last line is
# "N passed, N failed". Without Chromium (and no way to install it) the browser checks SKIP.
# Screenshots are kept in BUILD_DIR/test-artifacts/ (report.png, sample.png, diff.png).
set -u

BUILD=$(cd "${1:-build}" && pwd) || { echo "html.sh: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
HERE=$(cd "$(dirname "$0")" && pwd)
ART=$BUILD/test-artifacts
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-html.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$ART"
PASSED=0
FAILED=0
TIMEOUT=60

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; }
ok() { if [ "$2" = 0 ]; then pass "$1"; else fail "$1" "${3:-exit status $2}"; fi; }

# --- Chromium: use it, or install it (Debian, as root), or skip the browser checks ----------
CHROMIUM=""
for c in chromium chromium-browser google-chrome; do
    command -v "$c" >/dev/null 2>&1 && { CHROMIUM=$(command -v "$c"); break; }
done
if [ -z "$CHROMIUM" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "html.sh: installing chromium (apt-get)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >"$WORK/apt.log" 2>&1
    command -v chromium >/dev/null 2>&1 && CHROMIUM=$(command -v chromium)
fi

# browser NAME PAGE [html_check.py options...]: the page in Chromium, its lines counted here.
browser() {
    local name=$1 page=$2
    shift 2
    if [ -z "$CHROMIUM" ]; then
        skip "$name: browser" "chromium is not installed and could not be installed"
        return
    fi
    local out rc
    out=$(timeout $((TIMEOUT * 2)) python3 "$HERE/html_check.py" "$page" --name "$name" --chromium "$CHROMIUM" "$@" 2>"$WORK/$name.browser.err")
    rc=$?
    [ -n "$out" ] && echo "$out"
    if [ $rc = 77 ]; then
        skip "$name: browser" "chromium did not start: $(tail -c 200 "$WORK/$name.browser.err" | tr '\n' ' ')"
        return
    fi
    PASSED=$((PASSED + $(grep -c '^PASS' <<<"$out")))
    FAILED=$((FAILED + $(grep -c '^FAIL' <<<"$out")))
    if [ $rc != 0 ] && ! grep -q '^FAIL' <<<"$out"; then
        fail "$name: browser" "html_check.py exited $rc: $(tail -c 300 "$WORK/$name.browser.err" | tr '\n' ' ')"
    fi
}

# static PAGE JSON NAME: the page has no external resource and carries exactly that JSON.
static() {
    local page=$1 json=$2 name=$3 out
    out=$(python3 - "$page" "$json" <<'EOF' 2>&1
import json, re, sys
page = open(sys.argv[1], encoding="utf-8", errors="replace").read()
want = json.load(open(sys.argv[2]))
bad = re.findall(r'<(?:script|img|iframe|link)[^>]*\s(?:src|href)\s*=|@import|url\(\s*["\']?(?:https?:)?//|https?://(?!www\.w3\.org/2000/svg)', page)
if bad:
    print("external resource: %r" % bad[:3]); sys.exit(1)
m = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
if not m:
    print("no data element"); sys.exit(1)
got = json.loads(m.group(1))
# a page made from a trace names each frame once ("frames"); its stacks hold indices there
frames = got.get("frames")
if isinstance(frames, list):
    for key in ("sites", "leak_records", "errors"):
        for x in got.get(key) or []:
            for s in ("stack", "alloc_stack", "release_stack"):
                if isinstance(x.get(s), list):
                    x[s] = [frames[f] if isinstance(f, int) else f for f in x[s]]
# a capped list is the report's list cut at the count the page says it shows
for key, cut in (("leak_records", "leak_records_cut"), ("errors", "errors_cut")):
    if key in want and cut in got:
        want[key] = want[key][:got[cut]["shown"]]
# the page may carry more than the JSON report (views, address map); never less or different
diff = [k for k in want if got.get(k) != want[k]]
if diff:
    print("embedded JSON differs from the report in %s" % diff); sys.exit(1)
# each script element closes once (the data, the page's script, its parts: allocator chart, tags);
# a "</script>" left unescaped in the JSON would close one more than were opened
opened = page.replace(m.group(1), "").count("<script")
if page.count("</script>") != opened or opened < 2:
    print("%d </script> in the page for %d <script: the JSON was not escaped" % (page.count("</script>"), opened)); sys.exit(1)
EOF
    )
    ok "$name: self-contained, JSON embedded intact" $? "$out"
}

# --- 1. the sample report (every key the page knows), through `heaplens html` ---------------
SAMPLE=$HERE/sample_report.json
"$HL" html "$SAMPLE" -o "$WORK/sample.html" 2>"$WORK/sample.err"
ok "sample: heaplens html REPORT.json" $? "$(cat "$WORK/sample.err")"
static "$WORK/sample.html" "$SAMPLE" sample
browser sample "$WORK/sample.html" --expect-chart --expect-map --expect-hist --screenshot "$ART/sample.png"

# --- 2. a real trace: sqlite3 inserting rows (or a test program without sqlite3) -------------
R=$WORK/real
mkdir -p "$R"
if command -v sqlite3 >/dev/null 2>&1; then
    python3 - >"$R/in.sql" <<'EOF'
print("create table t(a integer primary key, b text, c blob);")
print("begin;")
for i in range(3000):
    print("insert into t(b, c) values('row %d', randomblob(%d));" % (i, 40 + i % 300))
print("commit;")
print("create index ib on t(b);")
print("select count(*), sum(length(c)) from t;")
EOF
    REAL=(sqlite3 :memory:)
else
    printf '' >"$R/in.sql"
    REAL=("$BUILD/programs/threads_churn")
fi
# glibc keeps what it keeps to the end (libc_freeres=0): sqlite3 releases all of its own, and the
# address map is checked on blocks in use at exit.
HEAPLENS_LIBC_FREERES=0 timeout $TIMEOUT "$HL" run -q --json "$R/run.json" --html "$R/run.html" -o "$R/t.hl" -- "${REAL[@]}" <"$R/in.sql" >"$R/stdout" 2>"$R/stderr"
ok "real: run --json --html -- ${REAL[*]}" $? "$(tail -c 300 "$R/stderr")"
if [ -s "$R/run.html" ]; then
    static "$R/run.html" "$R/run.json" real
    timeout $TIMEOUT "$HL" report -q --html "$R/report.html" --json "$R/report.json" "$R/t.hl" 2>"$R/report.err"
    ok "real: report --html TRACE" $? "$(cat "$R/report.err")"
    [ -s "$R/report.html" ] && static "$R/report.html" "$R/report.json" real-report
    # what the page must draw depends on the keys its embedded JSON has
    python3 -c 'import re,sys; p=open(sys.argv[1],encoding="utf-8",errors="replace").read(); print(re.search(r"<script type=\"application/json\" id=\"data\">(.*?)</script>", p, re.S).group(1))' "$R/run.html" >"$R/embedded.json"
    # the address map holds the blocks the scan at exit judged, one per verdict; the trace has
    # no addresses for the peak (format 3), so no map of it
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); am=d["address_map"]; n=len(am["exit"]); want=min(200000, sum(d["leaks"][k]["blocks"] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"))); print("exit map %d blocks, verdicts %d, peak map %s" % (n, want, "peak" in am)); sys.exit(0 if n == want and n > 0 and "peak" not in am else 1)' "$R/embedded.json" >"$R/exitmap.txt" 2>&1
    ok "real: address map at exit has the scan's blocks" $? "$(cat "$R/exitmap.txt")"
    opts=()
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if (d.get("timeline") or {}).get("points") else 1)' "$R/embedded.json" && opts+=(--expect-chart)
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d.get("address_map") else 1)' "$R/embedded.json" && opts+=(--expect-map)
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d.get("histogram") else 1)' "$R/embedded.json" && opts+=(--expect-hist)
    browser real "$R/run.html" "${opts[@]}" --screenshot "$ART/report.png"
else
    fail "real: HTML page" "run --html wrote nothing"
fi

# --- 3. diff: one program, two sizes; grow_table is what grows -------------------------------
P=$WORK/difftarget
cat >"$P.c" <<'EOF'
// difftarget N: grow_table keeps N blocks of 256 bytes (and leaks N/10 of them); steady_buffer
// and churn do the same whatever N is.
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) static void* steady_buffer(void) { void* p = malloc(4096); memset(p, 1, 4096); return p; }
__attribute__((noinline)) static void churn(void) { for (int i = 0; i < 2000; i++) { char* volatile p = malloc(64); p[0] = 1; free(p); } }
__attribute__((noinline)) static void** grow_table(int n) {
    void** t = malloc(sizeof(void*) * (size_t)n);
    for (int i = 0; i < n; i++) { t[i] = malloc(256); memset(t[i], 2, 256); }
    return t;
}
int main(int argc, char** argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    void* s = steady_buffer();
    churn();
    void** t = grow_table(n);
    for (int i = n / 10; i < n; i++) free(t[i]);
    for (int i = 0; i < n / 10; i++) t[i] = (void*)((unsigned long)t[i] ^ 0x5a5a5a5aUL); // lose the first tenth
    free(t);
    free(s);
    return 0;
}
EOF
if ! ${CC:-cc} -O1 -g -fno-omit-frame-pointer -o "$P" "$P.c" 2>"$WORK/cc.err"; then
    fail "diff: build the target" "$(cat "$WORK/cc.err")"
else
    timeout $TIMEOUT "$HL" run -q -o "$WORK/old.hl" -- "$P" 100 2>"$WORK/old.err"
    ok "diff: trace old (N=100)" $? "$(tail -c 300 "$WORK/old.err")"
    timeout $TIMEOUT "$HL" run -q -o "$WORK/new.hl" -- "$P" 5000 2>"$WORK/new.err"
    ok "diff: trace new (N=5000)" $? "$(tail -c 300 "$WORK/new.err")"
    timeout $TIMEOUT "$HL" diff --json "$WORK/diff.json" --html "$WORK/diff.html" "$WORK/old.hl" "$WORK/new.hl" >"$WORK/diff.txt" 2>"$WORK/diff.err"
    ok "diff: heaplens diff OLD NEW --json --html" $? "$(cat "$WORK/diff.err")"
    first=$(grep -E '^ +1 ' "$WORK/diff.txt" | head -1)
    if grep -q grow_table <<<"$first"; then pass "diff: text lists grow_table first"; else fail "diff: text lists grow_table first" "first line: '$first'"; fi
    out=$(python3 - "$WORK/diff.json" <<'EOF' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))["diff"]
s = d["sites"]
first = s[0]
names = [f.get("function") for f in first["stack"]]
assert "grow_table" in names, "first site is %s" % names[:3]
# the table (8 B per entry, another line of grow_table: same site) and its blocks
assert first["bytes"]["delta"] == (5000 - 100) * (256 + 8), "bytes delta %r" % first["bytes"]
assert first["allocations"]["delta"] == 4900, "allocations delta %r" % first["allocations"]
assert first["leaked_bytes"]["delta"] == (500 - 10) * 256, "leaked delta %r" % first["leaked_bytes"]
steady = [x for x in s if any(f.get("function") == "steady_buffer" for f in x["stack"][:2])]
assert steady and steady[0]["bytes"]["delta"] == 0 and steady[0]["status"] == "both", "steady_buffer %r" % steady[:1]
assert d["old"]["totals"]["allocations"] < d["new"]["totals"]["allocations"]
# held until exit, so at the peak too
assert 0 < first["peak_bytes"]["delta"] <= first["bytes"]["delta"], "peak delta %r" % first["peak_bytes"]
EOF
    )
    ok "diff: JSON: grow_table first, +4900 allocations, +1293600 B, leaked +125440 B, steady_buffer matched" $? "$out"
    timeout $TIMEOUT "$HL" diff --sort peak "$WORK/old.hl" "$WORK/new.hl" >"$WORK/diffpeak.txt" 2>&1
    first=$(grep -E '^ +1 ' "$WORK/diffpeak.txt" | head -1)
    if grep -q grow_table <<<"$first"; then pass "diff: --sort peak lists grow_table first"; else fail "diff: --sort peak lists grow_table first" "$(head -c 400 "$WORK/diffpeak.txt")"; fi
    browser diff "$WORK/diff.html" --mode diff --no-zoom --first-site grow_table --screenshot "$ART/diff.png"
    cp "$WORK/diff.html" "$ART/diff.html" 2>/dev/null
fi
[ -s "$R/run.html" ] && cp "$R/run.html" "$ART/report.html"
[ -s "$WORK/sample.html" ] && cp "$WORK/sample.html" "$ART/sample.html"

# --- 4. caps: more call sites and leak records than the page shows; the page says so ---------
C=$WORK/caps
mkdir -p "$C"
timeout $TIMEOUT "$HL" run -q -o "$C/t.hl" -- "$BUILD/programs/many_stacks" 6000 >/dev/null 2>"$C/run.err"
ok "caps: run many_stacks 6000" $? "$(tail -c 300 "$C/run.err")"
timeout $TIMEOUT "$HL" report -q --html "$C/page.html" --json "$C/full.json" "$C/t.hl" 2>"$C/report.err"
ok "caps: report --html --json" $? "$(cat "$C/report.err")"
timeout $TIMEOUT "$HL" report -q --json "$C/sites.json" --top 100000 "$C/t.hl" 2>>"$C/report.err"
out=$(python3 - "$C/page.html" "$C/full.json" "$C/sites.json" <<'EOF' 2>&1
import json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
full, allsites = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
bad = []
# the JSON report stays whole: every record, no cut
recs = full["leak_records"]
if "leak_records_cut" in full or len(recs) < 3000:
    bad.append("JSON report: %d leak records, cut %r" % (len(recs), full.get("leak_records_cut")))
lc = d.get("leak_records_cut")
if not lc or len(d["leak_records"]) != lc["shown"] or lc["shown"] + lc["records"] != len(recs):
    bad.append("page leak records %d, cut %r, report has %d" % (len(d["leak_records"]), lc, len(recs)))
elif lc["bytes"] != sum(r["bytes"] + r["indirect_bytes"] for r in recs[lc["shown"]:]):
    bad.append("cut leak bytes %d do not add up" % lc["bytes"])
cs = (d.get("cut") or {}).get("sites")
sites = allsites["sites"]
if not cs or cs["shown"] != len(d["sites"]) or cs["shown"] + cs["sites"] != len(sites):
    bad.append("page sites %d, cut %r, all sites %d" % (len(d["sites"]), cs, len(sites)))
else:
    for k in ("allocations", "bytes", "leaked_bytes", "temporary"):
        if sum(s[k] for s in d["sites"]) + cs[k] != sum(s[k] for s in sites):
            bad.append("%s: shown + cut != all sites" % k)
# the biggest site by bytes is on the page
if sites and max(s["bytes"] for s in d["sites"]) != max(s["bytes"] for s in sites):
    bad.append("the biggest site is not on the page")
print("; ".join(bad) or "page: %d of %d sites, %d of %d leak records, %d frames, %d bytes" % (
    len(d["sites"]), len(sites), lc["shown"], len(recs), len(d["frames"]), len(page)))
sys.exit(1 if bad else 0)
EOF
)
ok "caps: page keeps the biggest, sums the rest, JSON report whole ($out)" $? "$out"
browser caps "$C/page.html" --expect-hist --expect-text "This page is cut to stay small" \
    --expect-text "smaller leak records" --max-load 5

# --- 4b. a big trace: 200k distinct stacks, 100k leak records; the page stays small and opens
# in a browser in under 2 s with its tables drawn -----------------------------------------------
G=$WORK/big
mkdir -p "$G"
timeout $TIMEOUT "$HL" run -q -o "$G/t.hl" -- "$BUILD/programs/many_stacks" 200000 \
    >/dev/null 2>"$G/run.err"
ok "big: run many_stacks 200000" $? "$(tail -c 300 "$G/run.err")"
t0=$(date +%s.%N)
timeout $TIMEOUT "$HL" report -q --html "$G/page.html" "$G/t.hl" 2>"$G/report.err"
st=$?
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
ok "big: report --html ($took s)" $st "$(cat "$G/report.err")"
bytes=$(stat -c %s "$G/page.html" 2>/dev/null || echo 0)
if [ "$bytes" -gt 100000 ] && [ "$bytes" -le 10000000 ]; then
    pass "big: page of $bytes bytes (at most 10 MB)"
else
    fail "big: page of $bytes bytes (at most 10 MB)" "size out of range"
fi
browser big "$G/page.html" --expect-hist --expect-text "This page is cut to stay small" \
    --max-load 2 --tries 3

# --- the allocator chart (run --allocator-stats): after the heap timeline, its series drawn ---
if [ -x "$BUILD/programs/alloc_stats" ]; then
    timeout $TIMEOUT "$HL" run -q --allocator-stats=20 -o "$WORK/as.hl" --html "$WORK/as.html" -- \
        "$BUILD/programs/alloc_stats" 100 >/dev/null 2>"$WORK/as.err"
    st=$? # the program's own status, 5
    [ $st = 5 ] && [ -s "$WORK/as.html" ]
    ok "allocator chart: run --allocator-stats --html writes the page (status $st)" $? "$(head -2 "$WORK/as.err")"
    browser allocstats "$WORK/as.html" --expect-chart --expect-hist --expect-alloc-stats --no-zoom \
        --screenshot "$ART/allocstats.png"
else
    fail "allocator chart" "no $BUILD/programs/alloc_stats"
fi

# --- allocations by tag (the API's heaplens_tag): a table of their own, before the top sites --
if [ -x "$BUILD/tests/api/api_c" ]; then
    timeout $TIMEOUT "$HL" run -q -o "$WORK/tags.hl" --html "$WORK/tags.html" -- \
        "$BUILD/tests/api/api_c" tags >/dev/null 2>"$WORK/tags.err"
    ok "tags: run --html writes the page of a program that tags its allocations" $? "$(head -2 "$WORK/tags.err")"
    browser tags "$WORK/tags.html" --expect-chart --no-zoom --expect-text "Allocations by tag" \
        --expect-text "7/42" --expect-text "8/1"
else
    fail "tags page" "no $BUILD/tests/api/api_c (make $BUILD/tests/api/api_c)"
fi

# --- 5. heap errors: every kind of the checking options listed, each with its stacks ---------
K=$WORK/kinds
mkdir -p "$K"
timeout $TIMEOUT "$HL" run -q --guard-pages=1 --redzone=16 --json "$K/run.json" --html "$K/page.html" \
    -o "$K/t.hl" -- "$BUILD/programs/check_heap" kinds >/dev/null 2>"$K/run.err"
ok "kinds: run --guard-pages=1 --redzone=16 --html -- check_heap kinds" $? "$(tail -c 300 "$K/run.err")"
got=$(python3 -c 'import json,sys; print(" ".join(e["kind"] for e in json.load(open(sys.argv[1]))["errors"]))' "$K/run.json" 2>&1)
want="overflow read_overflow read_after_free write_after_free invalid_access underflow"
[ "$got" = "$want" ] && pass "kinds: the report has $want" || fail "kinds: the report's errors" "got [$got], expected [$want]"
static "$K/page.html" "$K/run.json" kinds
browser kinds "$K/page.html" --expect-errors "$K/run.json" --expect-text "write after free" \
    --expect-text "read after free" --expect-text "invalid access" --expect-text "underflow"

# --- 6. the CLI's behaviour on bad input -----------------------------------------------------
"$HL" diff "$WORK/old.hl" >/dev/null 2>&1
[ $? = 2 ] && pass "diff: one trace is a usage error (2)" || fail "diff: one trace is a usage error (2)" "other status"
"$HL" diff "$WORK/nonexistent.hl" "$WORK/old.hl" >/dev/null 2>"$WORK/bad.err"
[ $? = 1 ] && grep -q nonexistent "$WORK/bad.err" && pass "diff: missing trace named, status 1" || fail "diff: missing trace named, status 1" "$(cat "$WORK/bad.err")"

echo "$PASSED passed, $FAILED failed"
[ $FAILED -eq 0 ]
