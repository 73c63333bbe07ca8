# SPDX-License-Identifier: MIT
# summarize.py RAW.tsv OUT.md "key=value ..." - turn bench/run.sh's measurements into the
# per-workload tables (stdout) and a Markdown report (OUT.md). Ratios first: absolute times
# are supporting detail only.
import statistics
import sys
import time

raw_path, md_path, meta_s = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
meta = dict(kv.split("=", 1) for kv in meta_s.split())
TOOLS = ("native", "heaptrack", "heaplens")

order, desc, runs, analysis, reports, nprocs = [], {}, {}, {}, {}, {}
for line in open(raw_path):
    parts = line.rstrip("\n").split("\t")
    if len(parts) < 4:
        continue
    w, tool, rnd, phase = parts[:4]
    kv = {}
    for p in parts[4:]:
        if "=" in p:
            k, v = p.split("=", 1)
            kv[k] = v
    if w not in order:
        order.append(w)
    if phase == "desc":
        desc[w] = kv.get("desc", "")
        if "procs" in kv:
            nprocs[w] = int(kv["procs"])
    elif phase.startswith("report_"):
        reports.setdefault((w, phase[len("report_"):]), []).append(kv)
    elif phase == "page_open":
        reports[(w, "page_open")] = [kv]
    elif phase == "run":
        runs.setdefault((w, tool), []).append(kv)
    elif phase == "analyze":
        analysis[(w, tool)] = kv


def med(xs):
    return statistics.median(xs) if xs else None


def size(b):
    if b is None:
        return "-"
    b = float(b)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (b, unit)
        b /= 1024


def kb(k):
    return size(k * 1024) if k is not None else "-"


def secs(s):
    return "-" if s is None else ("%.3f s" % s if s < 10 else "%.1f s" % s)


def ratio(a, b):
    return "%.2fx" % (a / b) if a is not None and b else "-"


def summary(w, tool):
    """median wall/rss over the successful rounds, and the failure reason if any round failed"""
    rs = runs.get((w, tool), [])
    good = [r for r in rs if "fail" not in r]
    fails = [r["fail"] for r in rs if "fail" in r]
    s = {
        "wall": med([float(r["wall"]) for r in good]),
        "maxrss": med([int(r["maxrss_kb"]) for r in good]),
        "treerss": med([int(r["treerss_kb"]) for r in good]),
        "trace": med([int(r["trace_bytes"]) for r in good if "trace_bytes" in r]),
        "allocs": next((int(r["allocs"]) for r in good if "allocs" in r), None),
        "n": len(good),
        "rounds": len(rs),
        "fail": fails[0] if fails else None,
    }
    return s


def cell(s, text):
    """text for a cell of a tool that may have failed"""
    if s["n"] == 0:
        return "failed (%s)" % (s["fail"] or "not run")
    if s["fail"]:
        return "%s [%d/%d rounds failed: %s]" % (text, s["rounds"] - s["n"], s["rounds"], s["fail"])
    return text


def acell(w, tool, what):
    a = analysis.get((w, tool))
    if a is None:
        return "not run"
    if "fail" in a:
        return "failed (%s)" % a["fail"]
    if what == "time":
        return secs(float(a["wall"]))
    return kb(int(a["maxrss_kb"]))


rows = []  # summary rows for the markdown table
mrows = []  # memory / trace / analysis rows
text_out, md_out = [], []
for w in order:
    S = {t: summary(w, t) for t in TOOLS}
    nat, ht, hl = S["native"]["wall"], S["heaptrack"]["wall"], S["heaplens"]["wall"]
    allocs = None
    a = analysis.get((w, "heaptrack"), {})
    if "allocs" in a:
        allocs, src = int(a["allocs"]), "heaptrack_print"
    elif S["heaplens"]["allocs"]:
        allocs, src = S["heaplens"]["allocs"], "heaplens report"

    def over(t):
        if w in nprocs and nat is not None and t is not None:  # a cost per process, not per call
            return "%.2f ms/proc" % ((t - nat) / nprocs[w] * 1e3)
        if allocs and nat is not None and t is not None:
            return "%.0f ns" % ((t - nat) / allocs * 1e9)
        return "-"

    def rcell(tool, num, den):
        s = S[tool]
        if s["n"] == 0:
            return "failed (%s)" % (s["fail"] or "not run")
        return ratio(num, den)

    def short(c):
        return c if len(c) <= 64 else c[:61] + "...)"

    r_hl_nat = rcell("heaplens", hl, nat)
    r_ht_nat = rcell("heaptrack", ht, nat)
    if S["heaplens"]["n"] == 0 or S["heaptrack"]["n"] == 0:
        r_hl_ht = share = "-"
    else:
        r_hl_ht = ratio(hl, ht)
        # what the speed targets are stated in: heaplens's time above native, as a share of
        # heaptrack's time above native
        share = "%.0f%%" % (100.0 * (hl - nat) / (ht - nat)) if nat is not None and ht > nat else "-"
    an_hl = analysis.get((w, "heaplens"), {})
    an_ht = analysis.get((w, "heaptrack"), {})
    an_ratio = "-"
    if "wall" in an_hl and "wall" in an_ht and "fail" not in an_hl and "fail" not in an_ht:
        an_ratio = ratio(float(an_hl["wall"]), float(an_ht["wall"]))
    rows.append((w, "{:,}".format(allocs) if allocs else "-", short(r_hl_nat), short(r_ht_nat), r_hl_ht,
                 share, over(hl) if S["heaplens"]["n"] else "-",
                 over(ht) if S["heaptrack"]["n"] else "-", an_ratio))

    def mem(tool):
        s = S[tool]
        return kb(s["maxrss"]) if s["n"] else "failed"

    def tsize(tool):
        s = S[tool]
        return size(s["trace"]) if s["n"] else "failed"

    def an(tool):
        a = analysis.get((w, tool))
        if a is None:
            return "not run"
        if "fail" in a:
            return "failed (%s)" % short(a["fail"])
        return "%s / %s" % (secs(float(a["wall"])), kb(int(a["maxrss_kb"])))

    mrows.append((w, mem("native"), mem("heaptrack"), mem("heaplens"), tsize("heaptrack"),
                  tsize("heaplens"), an("heaptrack"), an("heaplens")))

    # Per-workload detail table.
    head = ["tool", "wall median", "x native", "overhead/alloc", "peak RSS (largest proc)",
            "peak RSS (tree sum)", "trace size", "analysis time", "analysis peak RSS"]
    det = []
    for t in TOOLS:
        s = S[t]
        an_t = "-" if t == "native" else acell(w, t, "time")
        an_m = "-" if t == "native" else acell(w, t, "mem")
        if s["n"] == 0:
            f = "failed (%s)" % (s["fail"] or "not run")
            det.append([t, f, "-", "-", "-", "-", "-", an_t, an_m])
            continue
        note = ""
        if s["fail"]:
            note = " [%d/%d failed: %s]" % (s["rounds"] - s["n"], s["rounds"], s["fail"])
        det.append([t, secs(s["wall"]) + note, ratio(s["wall"], nat) if t != "native" else "1.00x",
                    over(s["wall"]) if t != "native" else "-", kb(s["maxrss"]), kb(s["treerss"]),
                    size(s["trace"]) if t != "native" else "-", an_t, an_m])
    title = "%s: %s" % (w, desc.get(w, ""))
    headline = "heaplens/native %s | heaptrack/native %s | heaplens/heaptrack %s | report/print time %s" % (
        r_hl_nat, r_ht_nat, r_hl_ht, an_ratio)
    if allocs:
        headline += " | %s allocation calls (%s)" % ("{:,}".format(allocs), src)
    widths = [max(len(str(x[i])) for x in det + [head]) for i in range(len(head))]
    text_out.append("== " + title)
    text_out.append("   " + headline)
    for r_ in [head] + det:
        text_out.append("   " + "  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r_)))
    text_out.append("")
    md_out.append("### " + title + "\n")
    md_out.append("**" + headline + "**\n")
    md_out.append("| " + " | ".join(head) + " |")
    md_out.append("|" + "---|" * len(head))
    for r_ in det:
        md_out.append("| " + " | ".join(str(c).replace("|", "/") for c in r_) + " |")
    md_out.append("")

shead = ["workload", "alloc calls", "heaplens/native", "heaptrack/native", "heaplens/heaptrack",
         "overhead share", "heaplens ns/alloc", "heaptrack ns/alloc", "report/print time"]
mhead = ["workload", "peak RSS native", "peak RSS heaptrack (incl. interpret)", "peak RSS heaplens",
         "trace heaptrack (.zst)", "trace heaplens (.hl)", "heaptrack_print time / peak RSS",
         "heaplens report time / peak RSS"]
notes = """Notes:
- Ratios are of median wall times over %(rounds)s round(s); tools ran in alternation, order rotated each round.
- overhead share = (heaplens - native) / (heaptrack - native): heaplens's time above native as a share of heaptrack's.
- overhead/alloc = for procs, (tool median - native median) / programs started, in ms per process; elsewhere (tool median - native median) / allocation calls (as counted by heaptrack_print, else heaplens); wall time, so for churn_deep2 (2 threads, 1M pairs each) it is per allocation across both threads.
- Depth: heaplens run -d %(depth)s; heaptrack has no depth option, it unwinds at most 64 frames (Trace::MAX_SIZE), a couple of them its own.
- heaplens runs with its defaults otherwise (guard bytes, leak scan at exit, 10 ms sampling); heaptrack_print with its defaults.
- Peak RSS (largest proc) = getrusage(RUSAGE_CHILDREN).ru_maxrss: the largest single process in the measured tree. For heaptrack the tree holds the heaptrack shell script, the traced program and heaptrack_interpret, so it can be the helper's RSS. Tree sum = sampled (25 ms) sum over the live tree.
- Trace size: heaplens .hl file vs heaptrack's .zst. Analysis = `heaplens report TRACE` vs `heaptrack_print TRACE.zst` on round 1's traces.
- Every tool run and analysis is capped at %(vmem_mb)s MiB of virtual memory and %(timeout)ss; exceeding either shows as failed.
- Load average before / after the run: %(load0)s / %(load1)s (2-core machine; other jobs running at the same time skew all three tools).""" % dict(load0=meta.get("load0", "?"), load1=meta.get("load1", "?"),
    rounds=meta.get("rounds", "?"), depth=meta.get("depth", "?"), vmem_mb=meta.get("vmem_mb", "?"),
    timeout=meta.get("timeout", "?"))

# heaplens's reports of round 1's trace, in alternation: text (the plain `heaplens report`),
# JSON and HTML, medians; the page's time to draw in headless Chromium.
rhead = ["workload", "trace (.hl)", "text report", "JSON report", "JSON/text", "HTML page",
         "HTML/text", "HTML size", "peak RSS text / JSON / HTML", "Chromium draws page"]
rrows = []
for w in order:
    if not any((w, f) in reports for f in ("text", "json", "html")):
        continue

    def rep(fmt):
        """median wall, median peak RSS, bytes, failure of the rounds of one format"""
        rs = reports.get((w, fmt), [])
        good = [r for r in rs if "fail" not in r and "wall" in r]
        fail = next((r["fail"] for r in rs if "fail" in r), None)
        return (med([float(r["wall"]) for r in good]), med([int(r["maxrss_kb"]) for r in good if "maxrss_kb" in r]),
                next((int(r["bytes"]) for r in good if "bytes" in r), None), fail, len(rs))

    def tcell(x):
        wall, _, _, fail, n = x
        if wall is None:
            return "failed (%s)" % fail[:50] if fail else "not run"
        return secs(wall) + (" [%s]" % fail[:40] if fail else "")

    T, J, H = rep("text"), rep("json"), rep("html")
    po = reports.get((w, "page_open"), [{}])[0]
    page = "not run" if not po else ("failed (%s)" % po["fail"] if "fail" in po else secs(float(po["wall"])))
    S_hl = summary(w, "heaplens")
    rrows.append((w, size(S_hl["trace"]) if S_hl["n"] else "-", tcell(T), tcell(J), ratio(J[0], T[0]),
                  tcell(H), ratio(H[0], T[0]), size(H[2]), " / ".join(kb(x[1]) for x in (T, J, H)), page))
nrep = max((len(v) for k, v in reports.items() if k[1] == "text"), default=0)

w_ = [max(len(str(x[i])) for x in rows + [shead]) for i in range(len(shead))]
print("\n".join(text_out))
print("== summary (%s round(s)%s, took %ss)" % (meta.get("rounds", "?"), ", --quick" if meta.get("quick") == "1" else "", meta.get("elapsed", "?")))
for r_ in [shead] + rows:
    print("   " + "  ".join(str(c).ljust(w_[i]) for i, c in enumerate(r_)))
print()
w2 = [max(len(str(x[i])) for x in mrows + [mhead]) for i in range(len(mhead))]
for r_ in [mhead] + mrows:
    print("   " + "  ".join(str(c).ljust(w2[i]) for i, c in enumerate(r_)))
print()
if rrows:
    w3 = [max(len(str(x[i])) for x in rrows + [rhead]) for i in range(len(rhead))]
    for r_ in [rhead] + rrows:
        print("   " + "  ".join(str(c).ljust(w3[i]) for i, c in enumerate(r_)))
    print()
print(notes)

with open(md_path, "w") as f:
    f.write("# heaplens vs heaptrack - %s\n\n" % time.strftime("%Y-%m-%d %H:%M"))
    f.write("Rounds: %s%s. Run took %s s.\n\n" % (meta.get("rounds", "?"), " (--quick)" if meta.get("quick") == "1" else "", meta.get("elapsed", "?")))
    f.write("| " + " | ".join(shead) + " |\n|" + "---|" * len(shead) + "\n")
    for r_ in rows:
        f.write("| " + " | ".join(str(c).replace("|", "/") for c in r_) + " |\n")
    f.write("\n| " + " | ".join(mhead) + " |\n|" + "---|" * len(mhead) + "\n")
    for r_ in mrows:
        f.write("| " + " | ".join(str(c).replace("|", "/") for c in r_) + " |\n")
    if rrows:
        f.write("\nheaplens's reports of round 1's trace (`heaplens report`, `report -q --json`, `report -q --html`, in alternation, medians of %d round(s)); the page's time to draw in headless Chromium (tests/integration/html_check.py --load-time):\n\n" % nrep)
        f.write("| " + " | ".join(rhead) + " |\n|" + "---|" * len(rhead) + "\n")
        for r_ in rrows:
            f.write("| " + " | ".join(str(c).replace("|", "/") for c in r_) + " |\n")
    f.write("\n" + notes + "\n\n## Per workload\n\n" + "\n".join(md_out) + "\n")
print("bench: wrote %s" % md_path, file=sys.stderr)
