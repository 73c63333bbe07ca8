#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# reports.sh BUILD_DIR - the report views and the ecosystem formats on real programs traced by
# `heaplens run`: --summary/--top/--sort/--histogram/--timeline/--threads (text and JSON keys),
# --collapsed, --flamegraph (XML), --pprof (decoded by protoc with profile.proto), --massif
# (loaded by ms_print). Totals must round-trip against the JSON report. One line per check,
# "PASS name" or "FAIL name: reason"; the last line is "N passed, N failed"; exit 1 on failure.
# Needs: make all, the programs alloc_basic, cxx_containers, threads_alloc; python3, protoc,
# ms_print.
set -u

BUILD=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "FAIL setup: no build directory ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
HL=$BUILD/heaplens
PROGS=$BUILD/programs
HERE=$(cd "$(dirname "$0")" && pwd)
PROTO=$HERE/profile.proto
WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaplens-reports.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PASSED=0
FAILED=0
TIMEOUT=30

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit $?; }

# py NAME SCRIPT ARGS...: a python check; it prints nothing on success, a reason on failure.
py() {
    local name=$1 script=$2 out
    shift 2
    if out=$(python3 -c "$script" "$@" 2>&1) && [ -z "$out" ]; then
        pass "$name"
    else
        fail "$name" "$(echo "$out" | tail -3 | tr '\n' ' ')"
    fi
}

[ -x "$HL" ] || { fail setup "$HL missing (make all)"; finish; }
for tool in python3 protoc ms_print; do
    command -v $tool >/dev/null || fail "setup-$tool" "$tool not installed"
done

# trace NAME PROG: $WORK/NAME.hl from a run of the program.
trace() {
    local name=$1 prog=$PROGS/$2
    if [ ! -x "$prog" ]; then
        fail "run-$name" "$prog missing (make $BUILD/programs/$2)"
        return 1
    fi
    if ! (cd "$WORK" && timeout $TIMEOUT "$HL" run -q -o "$WORK/$name.hl" -- "$prog" \
              >"$WORK/$name.run.out" 2>&1) || [ ! -s "$WORK/$name.hl" ]; then
        fail "run-$name" "heaplens run failed: $(tail -2 "$WORK/$name.run.out" | tr '\n' ' ')"
        return 1
    fi
    pass "run-$name"
}

# Shared python: load the JSON report given as argv[1].
LOAD='import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]
def need(c, why):
    if not c:
        print(why); sys.exit(1)
'

check_program() {
    local n=$1 T=$WORK/$1.hl J=$WORK/$1.json
    R() { timeout $TIMEOUT "$HL" report "$T" "$@"; }

    # The plain report is unchanged: no view keys when no view option is given.
    if R -q --json "$WORK/$n.plain.json" && R --json "$WORK/$n.plain2.json" 2>"$WORK/$n.text" \
        && grep -q '^==heaplens== HEAP SUMMARY:' "$WORK/$n.text"; then
        py "$n-plain-report-unchanged" "$LOAD"'
need(not any(k in d for k in ("summary", "sites", "histogram", "timeline", "threads")), "view keys without view options")
' "$WORK/$n.plain.json"
    else
        fail "$n-plain-report-unchanged" "heaplens report failed"
    fi

    # Every view, in JSON (keys of the report object) and in text.
    if ! R --json "$J" --summary --top 100000 --sort bytes --histogram --timeline --threads \
            >"$WORK/$n.views.txt" 2>"$WORK/$n.views.err"; then
        fail "$n-views" "$(cat "$WORK/$n.views.err")"
        return
    fi
    pass "$n-views"
    py "$n-json-summary-matches-totals" "$LOAD"'
s = d["summary"]
for a, b in (("allocations", "allocations"), ("bytes_allocated", "bytes_allocated"), ("frees", "frees"),
             ("peak_heap_bytes", "peak_heap_bytes"), ("peak_heap_blocks", "peak_heap_blocks"),
             ("peak_time_ns", "peak_time_ns"), ("leaked_bytes", "in_use_bytes"), ("leaked_blocks", "in_use_blocks")):
    need(s[a] == t[b], "summary.%s %s != totals.%s %s" % (a, s[a], b, t[b]))
for k, v in d["leaks"].items():
    if k != "suppressed":
        need(s["leaks"][k]["bytes"] == v["bytes"], "leaks.%s differ" % k)
need(0 <= s["temporary_allocations"] <= s["allocations"], "temporary out of range")
' "$J"
    py "$n-json-sites-sorted-and-complete" "$LOAD"'
v = d["sites"]
need(d["sites_sort"] == "bytes", "sites_sort")
need(all(v[i]["bytes"] >= v[i + 1]["bytes"] for i in range(len(v) - 1)), "not sorted by bytes")
need(sum(x["bytes"] for x in v) == t["bytes_allocated"], "site bytes %d != %d" % (sum(x["bytes"] for x in v), t["bytes_allocated"]))
need(sum(x["allocations"] for x in v) == t["allocations"], "site allocations")
need(sum(x["peak_bytes"] for x in v) == t["peak_heap_bytes"], "site peak bytes %d != peak %d" % (sum(x["peak_bytes"] for x in v), t["peak_heap_bytes"]))
need(sum(x["leaked_bytes"] for x in v) == t["in_use_bytes"], "site leaked bytes")
need(all(x["stack"] and "function" in x["stack"][0] for x in v), "a site without its stack")
' "$J"
    # The leak records' stacks are written from what each return address stands for, made once
    # (json_frames.c); the sites' through the symbolized stack (report_stack): a record's stack
    # is that of the site its blocks came from, frame for frame, inlined frames included.
    py "$n-json-record-stacks-are-site-stacks" "$LOAD"'
sites = {json.dumps(x["stack"]) for x in d["sites"]}
recs = d["leak_records"]
need(recs, "no leak records")
for r in recs:
    need(json.dumps(r["stack"]) in sites, "a %s record with a stack no site has: %s" % (r["kind"], json.dumps(r["stack"])[:300]))
if sys.argv[2] == "inlined":
    need(any(f["inlined"] for r in recs for f in r["stack"]), "no record with an inlined frame")
' "$J" "$([ "$n" = cxx_containers ] && echo inlined || echo plain)"
    py "$n-json-histogram" "$LOAD"'
h = d["histogram"]
need(sum(b["count"] for b in h) == t["allocations"], "histogram count")
need(sum(b["bytes"] for b in h) == t["bytes_allocated"], "histogram bytes")
need(all(b["min"] <= b["bytes"] // max(b["count"], 1) < b["below"] for b in h), "a size outside its bucket")
need(all(b["below"] == 1 or b["below"] == 2 * b["min"] for b in h), "not powers of two")
' "$J"
    py "$n-json-timeline" "$LOAD"'
tl = d["timeline"]
p = tl["points"]
need(1 <= len(p) <= 1000, "%d points" % len(p))
need(max(x["heap_bytes"] for x in p) == t["peak_heap_bytes"], "timeline max != peak")
need(tl["peak"]["heap_bytes"] == t["peak_heap_bytes"] and tl["peak"]["time_ns"] == t["peak_time_ns"], "timeline peak")
need(all(p[i]["time_ns"] < p[i + 1]["time_ns"] for i in range(len(p) - 1)), "times not increasing")
need(max(x["rss_bytes"] for x in p) == t["rss_peak"], "rss peak")
' "$J"
    py "$n-json-threads" "$LOAD"'
th = d["threads"]
need(sum(x["allocations"] for x in th) == t["allocations"], "thread allocations")
need(sum(x["bytes"] for x in th) == t["bytes_allocated"], "thread bytes")
need(sum(x["frees"] for x in th) == t["frees"], "thread frees")
need(all(x["tid"] > 0 for x in th if x["allocations"]), "an allocating thread without its tid")
' "$J"
    if grep -q '^SUMMARY of ' "$WORK/$n.views.txt" && grep -q '^TOP ' "$WORK/$n.views.txt" \
        && grep -q '^ALLOCATION SIZES' "$WORK/$n.views.txt" \
        && grep -q '^HEAP OVER TIME' "$WORK/$n.views.txt" && grep -q '^THREADS' "$WORK/$n.views.txt"; then
        pass "$n-text-views"
    else
        fail "$n-text-views" "a section is missing"
    fi

    # --top/--sort in text: N entries, best first, for every key.
    for key in allocations bytes peak leaked temporary; do
        R -q --top 3 --sort $key --json "$WORK/$n.sort.json" >"$WORK/$n.sort.txt" 2>&1
        py "$n-sort-$key" "$LOAD"'
key = sys.argv[2]
field = {"allocations": "allocations", "bytes": "bytes", "peak": "peak_bytes", "leaked": "leaked_bytes", "temporary": "temporary"}[key]
v = d["sites"]
need(len(v) <= 3, "more than --top")
need(all(x[field] > 0 for x in v), "a site without any")
need(all(v[i][field] >= v[i + 1][field] for i in range(len(v) - 1)), "not sorted by " + key)
txt = [l for l in open(sys.argv[3]) if l.startswith("#")]
vals = [int(l.split(":")[1].split("|")[0].strip().replace(",", "")) for l in txt]
need(vals == [x[field] for x in v], "text %s != json %s" % (vals, [x[field] for x in v]))
' "$WORK/$n.sort.json" $key "$WORK/$n.sort.txt"
    done

    # Folded stacks: the totals of each metric round-trip.
    local ok=1
    for m in bytes allocations leaked peak; do
        R -q --collapsed "$WORK/$n.$m.folded" --metric $m || ok=0
    done
    if [ $ok = 1 ]; then
        py "$n-collapsed-totals" "$LOAD"'
def total(m):
    s = 0
    for line in open(sys.argv[2] + "." + m + ".folded"):
        stack, _, v = line.rstrip("\n").rpartition(" ")
        need(stack and not stack.startswith(";") and ";;" not in stack, "bad line: " + line)
        s += int(v)
    return s
need(total("bytes") == t["bytes_allocated"], "bytes %d != %d" % (total("bytes"), t["bytes_allocated"]))
need(total("allocations") == t["allocations"], "allocations")
need(total("leaked") == t["in_use_bytes"], "leaked")
need(total("peak") == t["peak_heap_bytes"], "peak")
need(any(l.startswith("_start;") or l.startswith("main;") for l in open(sys.argv[2] + ".bytes.folded")), "not outermost first")
' "$J" "$WORK/$n"
    else
        fail "$n-collapsed-totals" "--collapsed failed"
    fi

    # Flame graph: well-formed XML, frames as rect + text with title tooltips.
    if R -q --flamegraph "$WORK/$n.svg"; then
        py "$n-flamegraph-xml" '
import sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
need = lambda c, why: c or (print(why), sys.exit(1))
need(root.tag == ns + "svg", "root is " + root.tag)
g = root.findall(".//" + ns + "g")
need(len(g) >= 3, "%d frames" % len(g))
need(all(x.find(ns + "rect") is not None and x.find(ns + "title") is not None for x in g), "a frame without rect/title")
need("main" in "".join(x.find(ns + "title").text for x in g), "no main frame")
need("href" not in open(sys.argv[1]).read(), "external reference")
' "$WORK/$n.svg"
    else
        fail "$n-flamegraph-xml" "--flamegraph failed"
    fi

    # pprof: gzip, protoc decodes it, alloc_space sums to bytes_allocated.
    if R -q --pprof "$WORK/$n.pb.gz" && gzip -t "$WORK/$n.pb.gz" 2>/dev/null \
        && gzip -dc "$WORK/$n.pb.gz" | protoc --proto_path="$HERE" \
              --decode perftools.profiles.Profile "$PROTO" >"$WORK/$n.pprof.txt" 2>"$WORK/$n.pprof.err"; then
        py "$n-pprof-decodes-and-round-trips" "$LOAD"'
import re
text = open(sys.argv[2]).read()
samples = re.findall(r"^sample \{\n(.*?)^\}", text, re.S | re.M)
need(samples, "no samples")
vals = [[int(v) for v in re.findall(r"value: (-?\d+)", s)] for s in samples]
need(all(len(v) == 4 for v in vals), "4 values per sample")
need(sum(v[0] for v in vals) == t["allocations"], "alloc_objects")
need(sum(v[1] for v in vals) == t["bytes_allocated"], "alloc_space %d != %d" % (sum(v[1] for v in vals), t["bytes_allocated"]))
need(sum(v[3] for v in vals) == t["in_use_bytes"], "inuse_space")
strings = re.findall(r"^string_table: \"(.*)\"$", text, re.M)
need(strings and strings[0] == "", "string_table[0] must be empty")
types = re.findall(r"^sample_type \{\n  type: (\d+)\n  unit: (\d+)", text, re.M)
need([strings[int(a)] + "/" + strings[int(b)] for a, b in types] ==
     ["alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"], "sample types")
need(re.search(r"^mapping \{", text, re.M), "no mappings")
need(re.search(r"^location \{\n  id: \d+\n(  mapping_id: \d+\n)?  address: \d+\n  line \{", text, re.M), "no location with lines")
need("main" in strings, "main not in the string table")
' "$J" "$WORK/$n.pprof.txt"
    else
        fail "$n-pprof-decodes-and-round-trips" "$(tail -2 "$WORK/$n.pprof.err" 2>/dev/null | tr '\n' ' ')"
    fi

    # massif: ms_print loads it; the peak snapshot is the peak.
    if R -q --massif "$WORK/$n.massif" && ms_print "$WORK/$n.massif" >"$WORK/$n.ms_print" 2>&1; then
        py "$n-massif-peak" "$LOAD"'
import re
text = open(sys.argv[2]).read()
snaps = re.findall(r"mem_heap_B=(\d+)\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=(\w+)", text)
peaks = [int(b) for b, k in snaps if k == "peak"]
need(len(peaks) == 1, "%d peak snapshots" % len(peaks))
need(peaks[0] == t["peak_heap_bytes"], "massif peak %d != %d" % (peaks[0], t["peak_heap_bytes"]))
need(max(int(b) for b, k in snaps) == peaks[0], "a snapshot above the peak")
need(len(snaps) <= 101, "too many snapshots")
out = open(sys.argv[3]).read()
need("(peak)" in out, "ms_print found no peak")
need("{:,}".format(t["peak_heap_bytes"]) in out, "ms_print does not show the peak")
' "$J" "$WORK/$n.massif" "$WORK/$n.ms_print"
    else
        fail "$n-massif-peak" "$(tail -2 "$WORK/$n.ms_print" 2>/dev/null | tr '\n' ' ')"
    fi

    # --from/--to: a window past the end counts nothing; the whole run counts everything.
    R -q --json "$WORK/$n.late.json" --summary --from 1000s >/dev/null 2>&1
    R -q --json "$WORK/$n.all.json" --summary --from 0 --to 1000s >/dev/null 2>&1
    py "$n-window" "$LOAD"'
late = json.load(open(sys.argv[2]))["summary"]
whole = json.load(open(sys.argv[3]))["summary"]
need(late["allocations"] == 0 and late["bytes_allocated"] == 0, "events after the end counted")
need(whole["allocations"] == t["allocations"], "the whole window misses events")
' "$J" "$WORK/$n.late.json" "$WORK/$n.all.json"
}

if trace alloc_basic alloc_basic; then
    check_program alloc_basic
    # Exact numbers the program decides (tests/programs/alloc_basic.c).
    R() { timeout $TIMEOUT "$HL" report "$WORK/alloc_basic.hl" "$@"; }
    R -q --json "$WORK/ab.json" --summary --top 2 --sort bytes --histogram >/dev/null 2>&1
    py alloc_basic-exact "$LOAD"'
s = d["summary"]
need(s["bytes_allocated"] == 3578 and s["allocations"] == 17, "totals")
need(s["peak_heap_bytes"] == 2501, "peak")
need(s["leaked_bytes"] == 1078 and s["leaks"]["definitely_lost"]["bytes"] == 1078, "leaked")
v = d["sites"]
need(v[0]["bytes"] == 1500 and v[0]["stack"][0]["function"] == "calloc_five", "top site")
need(v[1]["bytes"] == 1001 and v[1]["stack"][0]["function"] == "leak_via_malloc", "second site")
h = {b["min"]: b for b in d["histogram"]}
need(h[64]["count"] == 11 and h[256]["count"] == 5 and h[512]["count"] == 1, "histogram")
' "$WORK/ab.json"
    R -q --json "$WORK/ab.f.json" --summary --top 10 --filter '^leak_via_' >/dev/null 2>&1
    py alloc_basic-filter "$LOAD"'
s = d["summary"]
need(s["allocations"] == 2 and s["bytes_allocated"] == 1078, "filtered totals %s" % s["allocations"])
need(all(x["stack"][0]["function"].startswith("leak_via_") for x in d["sites"]), "a site not matching")
' "$WORK/ab.f.json"

    # Bad input: one clear line and a non-zero status, never a crash.
    out=$(R --sort bogus 2>&1); st=$?
    if [ $st = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [[ $out == heaplens:* ]]; then
        pass bad-sort-key; else fail bad-sort-key "status $st: $out"; fi
    out=$(R --summary --filter '(' 2>&1); st=$?
    if [ $st = 1 ] && [[ $out == heaplens:* ]]; then
        pass bad-filter; else fail bad-filter "status $st: $out"; fi
    out=$(R --pprof /nonexistent/dir/x.pb.gz -q 2>&1); st=$?
    if [ $st = 1 ] && [[ $out == heaplens:* ]]; then
        pass unwritable-output; else fail unwritable-output "status $st: $out"; fi
    size=$(stat -c %s "$WORK/alloc_basic.hl")
    crashed=""
    for frac in 1 3 5 7 9; do
        head -c $((size * frac / 10)) "$WORK/alloc_basic.hl" >"$WORK/cut.hl"
        timeout $TIMEOUT "$HL" report "$WORK/cut.hl" --summary --top 5 --histogram --timeline \
            --threads --json "$WORK/cut.json" --collapsed "$WORK/cut.folded" \
            --flamegraph "$WORK/cut.svg" --pprof "$WORK/cut.pb.gz" --massif "$WORK/cut.massif" \
            >/dev/null 2>&1
        st=$?
        [ $st -ge 124 ] && crashed="$crashed $frac/10:$st"
    done
    if [ -z "$crashed" ]; then pass truncated-traces; else fail truncated-traces "crashed at$crashed"; fi
fi

# libstdc++'s exception pool kept to the end (cxx_freeres=0), as the one block in use at exit:
# the program releases all of its own, and the record's stack has inlined frames to check.
if HEAPLENS_CXX_FREERES=0 trace cxx_containers cxx_containers; then
    check_program cxx_containers
    timeout $TIMEOUT "$HL" report "$WORK/cxx_containers.hl" -q --pprof "$WORK/cx.pb.gz" >/dev/null 2>&1
    # Inlined frames: some location has more than one line (inlined functions, then the caller).
    if gzip -dc "$WORK/cx.pb.gz" | protoc --proto_path="$HERE" --decode perftools.profiles.Profile \
            "$PROTO" 2>/dev/null | python3 -c '
import re, sys
locs = re.findall(r"^location \{\n(.*?)^\}", sys.stdin.read(), re.S | re.M)
sys.exit(0 if any(l.count("line {") > 1 for l in locs) else 1)'; then
        pass cxx_containers-pprof-inlined-lines
    else
        fail cxx_containers-pprof-inlined-lines "no location with inlined lines"
    fi
fi

# The symbol cache names the C++ demangler in a file only when a name in it was mangled: the
# report of a C program finds its answers on disk without loading libstdc++, and that of a C++
# program reads its names back demangled, the same report as the one that wrote them.
if [ -s "$WORK/alloc_basic.hl" ] && [ -s "$WORK/cxx_containers.hl" ]; then
    SC=$WORK/symcache # made by heaplens, private (a directory others may write is not used)
    for n in alloc_basic cxx_containers; do
        for k in cold warm; do
            HEAPLENS_SYMBOL_CACHE=$SC LD_DEBUG=libs LD_DEBUG_OUTPUT="$WORK/$n.$k.ld" \
                timeout $TIMEOUT "$HL" report --top 5 "$WORK/$n.hl" >"$WORK/$n.$k.top" 2>&1
        done
    done
    # same_report N: the warm report of N says what the cold one did (else the first lines that
    # differ, on stdout).
    same_report() { diff "$WORK/$1.cold.top" "$WORK/$1.warm.top" | head -3 | tr '\n' ' '; }
    if ! ls "$SC"/*.sym >/dev/null 2>&1; then
        fail symbol-cache-written "no file in $SC"
    elif cat "$WORK"/alloc_basic.warm.ld.* 2>/dev/null | grep -q 'libstdc++'; then
        fail symbol-cache-c-without-libstdc++ "the warm report of a C program loaded libstdc++"
    elif [ -n "$(same_report alloc_basic)" ]; then
        fail symbol-cache-c-same-report "$(same_report alloc_basic)"
    else
        pass symbol-cache-c-without-libstdc++
    fi
    if ! grep -q 'std::' "$WORK/cxx_containers.warm.top"; then
        fail symbol-cache-cxx-demangled "no demangled name in the warm report"
    elif [ -n "$(same_report cxx_containers)" ]; then
        fail symbol-cache-cxx-same-report "$(same_report cxx_containers)"
    else
        pass symbol-cache-cxx-demangled
    fi
fi

if trace threads_alloc threads_alloc; then
    check_program threads_alloc
    py threads_alloc-several-threads "$LOAD"'
need(len([x for x in d["threads"] if x["allocations"]]) >= 2, "one allocating thread only")
' "$WORK/threads_alloc.json"
fi

finish
