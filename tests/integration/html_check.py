#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# html_check.py - checks a heaplens HTML page in headless Chromium through the DevTools protocol
# (a minimal websocket client on the standard library: no pip). Loads the page, then checks that
# it drew what its data holds, clicks a flame-graph frame and checks the zoom, fetched nothing
# from the network, threw no exception, and saves a full-page screenshot.
#
#   html_check.py PAGE.html [--name N] [--mode report|diff] [--expect-chart] [--expect-map]
#                 [--expect-hist] [--first-site FUNCTION] [--screenshot OUT.png] [--chromium BIN]
#
# One line per check, "PASS name" or "FAIL name: reason". Exit status 0 when all passed, 1 when
# one failed, 77 when Chromium could not be started (the caller prints SKIP).
import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


class WS:
    """Just enough RFC 6455 for the DevTools protocol: text frames, client masking."""

    def __init__(self, url, timeout=30):
        assert url.startswith("ws://")
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port or 80)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise OSError("websocket handshake: connection closed")
            head += chunk
        head, _, self.buf = head.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise OSError("websocket handshake refused: " + head.split(b"\r\n")[0].decode())

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise OSError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        hdr = bytes([0x81])
        n = len(data)
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
        self.sock.sendall(hdr + mask + masked)

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
            op = b0 & 0x0F
            if op == 0x8:
                raise OSError("websocket closed by peer")
            if op == 0x9:  # ping: answer is optional for our short sessions
                continue
            message += payload
            if b0 & 0x80:
                return message.decode("utf-8", "replace")


class CDP:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("JS: " + json.dumps(r["exceptionDetails"])[:400])
        return r.get("result", {}).get("value")

    def wait(self, expr, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            try:
                if self.js(expr):
                    return True
            except RuntimeError:
                pass
            time.sleep(0.1)
        return False

    def click(self, x, y):
        for t in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=t, x=x, y=y, button="left", clickCount=1)


def find_chromium(explicit):
    for c in [explicit, "chromium", "chromium-browser", "google-chrome", "chrome"]:
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def start_browser(binary):
    prof = tempfile.mkdtemp(prefix="heaplens-chromium.")
    args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
            f"--user-data-dir={prof}", "--remote-debugging-port=0", "--remote-allow-origins=*",
            "--window-size=1400,1000", "about:blank"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    port_file = os.path.join(prof, "DevToolsActivePort")
    end = time.time() + 30
    while time.time() < end and proc.poll() is None:
        if os.path.exists(port_file):
            lines = open(port_file).read().split("\n")
            if lines and lines[0].strip().isdigit():
                return proc, prof, int(lines[0])
        time.sleep(0.1)
    err = b""
    if proc.poll() is None:
        proc.kill()
    try:
        err = proc.communicate(timeout=5)[1] or b""
    except Exception:
        pass
    shutil.rmtree(prof, ignore_errors=True)
    raise OSError("chromium did not start: " + err.decode("utf-8", "replace")[-300:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--name", default="html")
    ap.add_argument("--mode", default="report", choices=["report", "diff"])
    ap.add_argument("--expect-chart", action="store_true")
    ap.add_argument("--expect-map", action="store_true")
    ap.add_argument("--expect-hist", action="store_true")
    ap.add_argument("--expect-alloc-stats", action="store_true",
                    help="the allocator chart (--allocator-stats) is drawn after the timeline")
    ap.add_argument("--first-site", default=None)
    ap.add_argument("--no-zoom", action="store_true", help="skip the click-to-zoom check (one-chain graphs)")
    ap.add_argument("--screenshot", default=None)
    ap.add_argument("--expect-text", action="append", default=[],
                    help="text the rendered page must show (repeatable)")
    ap.add_argument("--expect-errors", default=None,
                    help="a JSON report: each of its errors listed with its kind and stacks")
    ap.add_argument("--max-load", type=float, default=10.0, help="seconds the page may take to draw")
    ap.add_argument("--chromium", default=None)
    ap.add_argument("--tries", type=int, default=1, help="loads at most until one is under --max-load")
    ap.add_argument("--load-time", action="store_true", help="print load_s=SECONDS once drawn, then stop (bench)")
    a = ap.parse_args()

    failed = 0

    def check(name, ok, why=""):
        nonlocal failed
        if ok:
            print(f"PASS {a.name}: {name}")
        else:
            failed += 1
            print(f"FAIL {a.name}: {name}: {why}")
        sys.stdout.flush()
        return ok

    binary = find_chromium(a.chromium)
    if not binary:
        print("chromium not found", file=sys.stderr)
        return 77
    try:
        proc, prof, port = start_browser(binary)
    except OSError as e:
        print(str(e), file=sys.stderr)
        return 77
    try:
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t.get("type") == "page")
        cdp = CDP(WS(page["webSocketDebuggerUrl"]))
        cdp.call("Runtime.enable")
        cdp.call("Page.enable")
        cdp.call("Network.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
        url = "file://" + os.path.abspath(a.page)
        # On a shared machine one load can stall for reasons not the page's: the best of
        # --tries loads is the page's own time.
        best = None
        for attempt in range(max(1, a.tries)):
            if attempt:  # the old document must not answer for the new one
                cdp.js("window.heaplens && (window.heaplens.ready = false)")
            t0 = time.time()
            cdp.call("Page.navigate", url=url)
            # ... and every script of the page has run (its parts come after the main script)
            ready = cdp.wait("window.heaplens && window.heaplens.ready === true && "
                             "document.readyState !== 'loading'", 30)
            load_s = time.time() - t0
            if not ready:
                break
            best = load_s if best is None else min(best, load_s)
            if best < a.max_load:
                break
        check("page loads and draws", ready, "window.heaplens.ready never became true")
        if not ready:
            return 1
        load_s = best
        tries = f", best of {attempt + 1} loads" if attempt else ""
        check(f"drawn in {load_s:.2f}s (under {a.max_load:g}s{tries})", load_s < a.max_load, f"took {load_s:.1f}s")
        if a.load_time:  # bench: how long the page took to draw, nothing more
            print("load_s=%.3f" % load_s)
            return 0
        for t in a.expect_text:
            shown = cdp.js("document.body.innerText.indexOf(%s) >= 0" % json.dumps(t))
            check(f"page shows {t!r}", shown, "not in the page's visible text")
        if a.expect_errors:
            # Each error's line opened (its stacks are drawn on opening): its kind, the
            # functions of its stack and of its block's allocation stack, in the report's order.
            errs = json.load(open(a.expect_errors)).get("errors") or []
            cdp.js("document.querySelectorAll('#errors details').forEach(function (d) { d.open = true; })")
            time.sleep(0.3)
            texts = cdp.js("Array.prototype.map.call(document.querySelectorAll('#errors details'), function (d) { return d.innerText; })") or []
            check(f"{len(errs)} heap errors listed", len(texts) == len(errs), f"{len(texts)} on the page")
            for i, e in enumerate(errs[:len(texts)]):
                want = [e["kind"].replace("_", " ")]
                want += [f["function"] for f in (e.get("stack") or [])[:2] if f.get("function")]
                want += [f["function"] for f in (e.get("alloc_stack") or [])[:1] if f.get("function")]
                missing = [w for w in want if w not in texts[i]]
                check(f"error {i + 1}: {' / '.join(want)}", not missing,
                      f"not shown: {missing}; the line reads {texts[i][:200]!r}")
        err = cdp.js("getComputedStyle(document.getElementById('error-box')).display === 'none' ? '' : document.getElementById('error-box').textContent")
        check("no drawing errors", not err, err)

        if a.mode == "report":
            if a.expect_chart:
                n = cdp.js("document.querySelectorAll('#chart path.series').length")
                check("timeline chart drawn", n and n >= 2, f"{n} series paths")
                pk = cdp.js("!!document.querySelector('#chart #peak-marker circle')")
                check("peak marked on the chart", pk, "no #peak-marker")
            else:
                note = cdp.js("document.getElementById('chart-note').textContent")
                check("chart degrades without a timeline", bool(note), "no note")
            if a.expect_alloc_stats:
                st = cdp.js("""(function () { var s = document.getElementById('s-alloc-stats');
                    return { ready: !!(window.heaplensStats && window.heaplensStats.ready), shown: !!s && !s.hidden,
                      after: !!s && document.getElementById('s-timeline').nextElementSibling === s,
                      series: Array.prototype.map.call(document.querySelectorAll('#as-chart path.as-series'), function (p) { return p.getAttribute('data-series'); }),
                      peak: !!document.querySelector('#as-chart #as-peak line'),
                      note: document.getElementById('as-note').textContent,
                      nav: !!document.querySelector('#nav a[data-for="s-alloc-stats"]') }; })()""")
                check("allocator chart shown right after the heap timeline", st and st["shown"] and st["after"] and st["nav"], f"{st}")
                check("allocator chart draws the live heap, in use, free and RSS",
                      st and all(any(s.startswith(w) for s in st["series"]) for w in ("live heap", "in use", "free", "RSS")),
                      f"{st and st['series']}")
                check("RSS - live heap marked at the peak", st and st["peak"] and "live heap" in st["note"] and "% of RSS" in st["note"], f"{st}")
            else:
                hidden = cdp.js("!document.getElementById('s-alloc-stats') || document.getElementById('s-alloc-stats').hidden")
                check("no allocator chart without --allocator-stats", hidden, "the section is shown")

        # flame graph: drawn, capped, zooms on click, resets
        n = cdp.js("document.querySelectorAll('#flame rect').length")
        check("flame graph drawn", n and n > 1, f"{n} rects")
        check("flame graph capped (at most 2600 rects)", n is not None and n <= 2600, f"{n} rects")
        # a frame of depth >= 2 whose width is well under the full width, not an "other" node
        target = None if a.no_zoom else cdp.js("""(function () {
            var f = window.heaplens.flame, W = document.getElementById('flame').getBoundingClientRect().width, best = null;
            f.rects.forEach(function (r, i) { if (r.d >= 2 && !r.n.other && !r.anc && r.w > 12 && r.w < W * 0.6 && (!best || r.w > best.w)) best = { i: i, w: r.w, d: r.d, name: r.n.name }; });
            if (!best) return null;
            var el = document.querySelector('#flame g[data-i="' + best.i + '"] rect'); el.scrollIntoView({ block: 'center' });
            var b = el.getBoundingClientRect(); best.x = b.left + Math.min(6, b.width / 2); best.y = b.top + b.height / 2; best.W = W; return best; })()""")
        if not a.no_zoom and check("flame graph has a frame to click", target is not None, "no narrow frame at depth >= 2"):
            cdp.click(target["x"], target["y"])
            time.sleep(0.2)
            z = cdp.js("""(function () {
                var f = window.heaplens.flame, W = document.getElementById('flame').getBoundingClientRect().width;
                var i = f.rects.findIndex(function (r) { return r.n === f.zoom; });
                var el = document.querySelector('#flame g[data-i="' + i + '"] rect');
                return { name: f.zoom.name, w: el ? el.getBoundingClientRect().width : -1, W: W }; })()""")
            check("click zooms: the clicked frame becomes full width",
                  z["name"] == target["name"] and z["w"] >= z["W"] * 0.98,
                  f"clicked {target['name']!r} ({target['w']:.0f}px), zoom is {z['name']!r} at {z['w']:.0f} of {z['W']:.0f}px")
            cdp.js("document.getElementById('flame-reset').click()")
            back = cdp.js("window.heaplens.flame.zoom === window.heaplens.flame.root")
            check("reset zoom", back, "zoom not back at the root")
        metrics = cdp.js("""Array.prototype.map.call(document.querySelectorAll('#flame-metrics button'), function (b) {
            b.click(); var n = document.querySelectorAll('#flame rect').length; return [b.textContent, n]; })""") or []
        with_data = [m for m in metrics if "(none)" not in m[0]]
        # back to the first metric with data (bytes when there are any), as a reader would see it
        cdp.js("""(function () { var bs = Array.prototype.slice.call(document.querySelectorAll('#flame-metrics button')).filter(function (b) { return b.textContent.indexOf('(none)') < 0; });
            var b = bs.filter(function (b) { return /^bytes/.test(b.textContent); })[0] || bs[0]; if (b) b.click(); })()""")
        check("flame graph switches metrics", len(metrics) >= 2 and all(m[1] > 1 for m in with_data),
              f"{metrics}")

        if a.mode == "report":
            # the top call sites table: a row per site with some of the sorted measure, up to
            # the 25 it shows at first, each naming its site
            top = cdp.js("""(function () { var rows = document.querySelectorAll('#top tr td:first-child');
                var d = JSON.parse(document.getElementById('data').textContent), key = document.getElementById('top-sort').value;
                var want = (d.sites || []).filter(function (s) { var x = s[key]; return typeof x === 'boolean' ? x : x > 0; }).length;
                return [rows.length, Math.min(want, 25), rows.length ? rows[0].textContent.trim().length : 0]; })()""") or [0, -1, 0]
            check(f"top call sites table: {top[0]} rows", top[0] == top[1] and (top[0] == 0 or top[2] > 0), f"{top}")
            # a program that leaked nothing (nor kept anything at exit) has no list: the page says so
            leaks = cdp.js("""(function () { var d = document.querySelector('#leaks details');
                var recs = JSON.parse(document.getElementById('data').textContent).leak_records;
                if (!d) return Array.isArray(recs) && !recs.length && /Nothing leaked/.test(document.getElementById('leaks').textContent) ? -1 : null;
                d.open = true; return new Promise(function (ok) { setTimeout(function () { ok(d.querySelectorAll('ol li').length); }, 50); }); })()""")
            if leaks == -1:
                check("no leak records: the page says nothing leaked", True, "")
            else:
                check("leak list expands to a symbolized stack", leaks and leaks > 0, f"{leaks}")
            if a.expect_hist:
                hb = cdp.js("document.querySelectorAll('#hist rect.hbar').length")
                check("size histogram drawn", hb and hb > 1, f"{hb} bars")
            if a.expect_map:
                painted = cdp.js("""Array.prototype.map.call(document.querySelectorAll('#maps canvas'), function (c) {
                    var d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, colored = 0;
                    for (var i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) colored++;
                    return [c.getAttribute('data-snapshot'), colored]; })""") or []
                check("address maps painted (" + ", ".join(p[0] for p in painted) + ")",
                      len(painted) >= 1 and all(p[1] > 0 for p in painted), f"{painted}")
            else:
                check("address map degrades when missing", cdp.js("document.getElementById('map-note').textContent.length > 0"), "no note")
        else:
            rows = cdp.js("Array.prototype.map.call(document.querySelectorAll('#diff-rows tr'), function (r) { return r.textContent; }).slice(1, 4)") or []
            check("diff table lists grown sites", len(rows) >= 1, f"{rows}")
            if a.first_site:
                check(f"grown site first: {a.first_site}", rows and a.first_site in rows[0], f"first row: {rows[:1]}")

        # nothing from the network, no exceptions
        urls = [e["params"]["request"]["url"] for e in cdp.events if e["method"] == "Network.requestWillBeSent"]
        remote = [u for u in urls if not (u.startswith("file:") or u.startswith("data:") or u.startswith("about:"))]
        check("no network requests", not remote, f"{remote[:3]}")
        exc = [e["params"]["exceptionDetails"].get("exception", {}).get("description", "?")[:200]
               for e in cdp.events if e["method"] == "Runtime.exceptionThrown"]
        check("no JavaScript exceptions", not exc, f"{exc[:2]}")

        if a.screenshot:
            cdp.js("window.scrollTo(0, 0)")
            shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            os.makedirs(os.path.dirname(os.path.abspath(a.screenshot)), exist_ok=True)
            with open(a.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            size = os.path.getsize(a.screenshot)
            check(f"screenshot {a.screenshot}", size > 10000, f"{size} bytes")
    except Exception as e:  # a protocol or browser failure is a failed check, not a crash
        check("devtools session", False, f"{type(e).__name__}: {e}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(prof, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
