#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# live_scan.py - the live leak scan of a process holding a big heap, next to the exit scan of the
# same state and LeakSanitizer's exit check, all from one run (rounds alternate the variants).
#   bench/live_scan.py --heaplens BUILD/heaplens --prog BUILD/bench/live_big
#                      [--lsan BUILD/bench/live_big_lsan] [--blocks N] [--rounds R] [--dir DIR]
# live_big (bench/live_big.c) makes N blocks, writes its pid and waits for a file. Each round runs:
#   heaplens   `heaplens run -q` of it: then, while it waits, raw round trips on its control
#              socket: `flush` (the writer's answer latency), `status` (which counts the live
#              blocks), `scan` (the program's threads are stopped for the scan); then
#              `printf 'leaks\n' | heaplens shell PID` end to end (a scan, re-reading the trace,
#              the report); then its exit (the exit scan)
#   noscan     `heaplens run -q --no-scan`: its exit without the scan (the trace's end only)
#   native     the program alone: its exit
#   lsan       the program built with clang -fsanitize=leak: its exit (the leak check)
#   lsan0      the same with LSAN_OPTIONS=detect_leaks=0
# An exit is timed from the moment the file it waits for appears to its reaping. Prints medians
# and ratios of the same run; exits non-zero when a variant failed or a verdict was wrong.
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

WAIT_S = 120  # the longest a step may take before the variant reads failed
LEAKED_EVERY = 100  # live_big.c drops every hundredth block from its array (LEAK_EVERY),
LEAKED_AT = 51  # ...starting at this one (LEAK_AT): the definite leaks the scan must find


def ctl_path(pid):
    tmp = os.environ.get("TMPDIR", "")
    if not tmp.startswith("/"):
        tmp = "/tmp"
    return "%s/heaplens-%d/ctl.%d" % (tmp, os.geteuid(), pid)


def round_trip(pid, cmd):
    """One command on the control socket: (seconds from connect to the answer line, answer)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(WAIT_S)
    give_up = time.monotonic() + WAIT_S
    try:
        while True:  # the writer thread makes the socket: it may come after the pid file
            t0 = time.monotonic()
            try:
                s.connect(ctl_path(pid))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if t0 > give_up:
                    raise
                time.sleep(0.01)
        s.sendall((cmd + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            d = s.recv(4096)
            if not d:
                break
            buf += d
        t1 = time.monotonic()
    finally:
        s.close()
    return t1 - t0, buf.decode(errors="replace").strip()


class Failed(Exception):
    pass


def start(argv, env, work):
    """Starts a live_big variant; returns (process, pid of live_big, seconds until it was ready)."""
    pidf, gof = os.path.join(work, "pid"), os.path.join(work, "go")
    for f in (pidf, gof):
        if os.path.exists(f):
            os.unlink(f)
    t0 = time.monotonic()
    p = subprocess.Popen(argv + [pidf, gof], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "err"), "w"))
    while True:
        try:
            with open(pidf) as f:
                text = f.read()
            if text.endswith("\n"):
                return p, int(text), time.monotonic() - t0
        except FileNotFoundError:
            pass
        if p.poll() is not None:
            raise Failed("exited (status %d) before it was ready: %s" % (p.returncode, tail(work)))
        if time.monotonic() - t0 > WAIT_S:
            stop(p, work)
            raise Failed("not ready after %d s" % WAIT_S)
        time.sleep(0.005)


def finish(p, work):
    """Lets the variant return; seconds from the go file to its reaping."""
    t0 = time.monotonic()
    open(os.path.join(work, "go"), "w").close()
    try:
        status = p.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        stop(p, work)
        raise Failed("did not exit within %d s" % WAIT_S)
    dt = time.monotonic() - t0
    if status != 0:
        raise Failed("exit status %d: %s" % (status, tail(work)))
    return dt


def stop(p, work):
    open(os.path.join(work, "go"), "w").close()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def tail(work):
    try:
        with open(os.path.join(work, "err")) as f:
            lines = [l.strip() for l in f if l.strip()]
        return lines[-1][:120] if lines else "(no message)"
    except OSError:
        return "(no message)"


def run_heaplens(a, work, res):
    trace = os.path.join(work, "live.hl")
    p, pid, ready = start([a.heaplens, "run", "-q", "-o", trace, "--", a.prog, str(a.blocks)],
                          None, work)
    try:
        res.setdefault("heaplens ready", []).append(ready)
        for cmd in ("flush", "status"):
            dt, ans = round_trip(pid, cmd)
            if not ans.startswith("ok"):
                raise Failed(cmd + ": " + ans)
            res.setdefault(cmd + " round trip", []).append(dt)
        dt, ans = round_trip(pid, "scan")
        if not ans.startswith("ok scan"):
            raise Failed("scan: " + ans)
        leaked = max(0, (a.blocks - LEAKED_AT + LEAKED_EVERY - 1) // LEAKED_EVERY)
        fields = dict(f.split("=", 1) for f in ans.split()[2:] if "=" in f)
        if fields.get("definite", "").split("/")[-1] != str(leaked):
            raise Failed("scan found other leaks than the %d expected: %s" % (leaked, ans))
        res.setdefault("scan round trip", []).append(dt)
        res["scan answer"] = ans
        t0 = time.monotonic()
        sh = subprocess.run([a.heaplens, "shell", str(pid)], input=b"leaks\n",
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=WAIT_S)
        dt = time.monotonic() - t0
        out = sh.stdout.decode(errors="replace")
        if sh.returncode != 0 or "{:,} blocks are definitely lost".format(leaked) not in out:
            raise Failed("shell leaks (status %d): %s" % (sh.returncode, out.strip()[-200:]))
        res.setdefault("shell leaks", []).append(dt)
    except BaseException:
        stop(p, work)
        raise
    res.setdefault("exit heaplens", []).append(finish(p, work))
    res["trace bytes"] = os.path.getsize(trace)
    os.unlink(trace)


def run_plain(name, argv, env, work, res):
    p, _, ready = start(argv, env, work)
    res.setdefault(name + " ready", []).append(ready)
    res.setdefault("exit " + name, []).append(finish(p, work))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heaplens", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--lsan", default="")
    ap.add_argument("--blocks", type=int, default=1000000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="live_scan.", dir=a.dir or None)
    variants = ["heaplens", "noscan", "native"]
    if a.lsan:
        variants += ["lsan", "lsan0"]
    res, failed = {}, {}
    # exitcode=0: the leaks are expected (the check runs as ever, its exit status is not 23)
    env_lsan = dict(os.environ, LSAN_OPTIONS="exitcode=0")
    env_lsan0 = dict(os.environ, LSAN_OPTIONS="detect_leaks=0")
    for r in range(a.rounds):
        # Rotate the order each round so no variant always runs first.
        for k in range(len(variants)):
            v = variants[(k + r) % len(variants)]
            if v in failed:
                continue
            print("bench: live_scan round %d/%d: %s" % (r + 1, a.rounds, v), file=sys.stderr)
            try:
                if v == "heaplens":
                    run_heaplens(a, work, res)
                elif v == "noscan":
                    run_plain("noscan", [a.heaplens, "run", "-q", "--no-scan", "-o",
                                         os.path.join(work, "noscan.hl"), "--", a.prog,
                                         str(a.blocks)], None, work, res)
                    os.unlink(os.path.join(work, "noscan.hl"))
                elif v == "native":
                    run_plain("native", [a.prog, str(a.blocks)], None, work, res)
                elif v == "lsan":
                    run_plain("lsan", [a.lsan, str(a.blocks)], env_lsan, work, res)
                else:
                    run_plain("lsan0", [a.lsan, str(a.blocks)], env_lsan0, work, res)
            except (Failed, OSError, subprocess.SubprocessError) as e:
                failed[v] = str(e)
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    os.rmdir(work)
    report(a, res, failed)
    return 1 if failed else 0


def report(a, res, failed):
    med = {k: statistics.median(v) for k, v in res.items() if isinstance(v, list) and v}

    def ms(k):
        return "%9.1f ms" % (med[k] * 1e3) if k in med else "%12s" % "n/a"

    def ratio(x, y):
        return "%.2f" % (x / y) if x is not None and y else "n/a"

    def diff(x, y):
        return med[x] - med[y] if x in med and y in med else None

    print()
    print("== live leak scan: %s blocks held by a waiting process (bench/live_big.c), "
          "median of %d rounds ==" % (format(a.blocks, ","), a.rounds))
    if "scan answer" in res:
        print("  scan's answer: " + res["scan answer"])
        print("  trace at the exit: %s bytes" % format(res["trace bytes"], ","))
    exit_scan = diff("exit heaplens", "exit noscan")
    lsan_check = diff("exit lsan", "exit lsan0")
    rows = [
        ("control socket `flush` round trip (the writer's answer, no scan)", "flush round trip",
         ""),
        ("control socket `status` round trip", "status round trip", ""),
        ("control socket `scan` round trip (threads stopped)", "scan round trip",
         "scan/exit scan %s" % ratio(med.get("scan round trip"), exit_scan)),
        ("`printf 'leaks\\n' | heaplens shell PID`", "shell leaks",
         "shell/scan %s" % ratio(med.get("shell leaks"), med.get("scan round trip"))),
        ("exit under heaplens run (exit scan + trace end)", "exit heaplens", ""),
        ("exit under heaplens run --no-scan", "exit noscan", ""),
        ("exit native", "exit native", ""),
        ("exit, LSan build (leak check)", "exit lsan", ""),
        ("exit, LSan build, detect_leaks=0", "exit lsan0", ""),
    ]
    for label, key, note in rows:
        print("  %-62s %s  %s" % (label, ms(key), note))
    if exit_scan is not None:
        print("  %-62s %9.1f ms" % ("exit scan = heaplens - --no-scan", exit_scan * 1e3))
    if lsan_check is not None:
        print("  %-62s %9.1f ms" % ("LSan's check = detect_leaks=1 - detect_leaks=0",
                                     lsan_check * 1e3))
        print("  heaplens scan / LSan check: live round trip %s, exit scan %s" % (
            ratio(med.get("scan round trip"), lsan_check), ratio(exit_scan, lsan_check)))
    print("  making the blocks (start to ready): heaplens/native %s, LSan/native %s" % (
        ratio(med.get("heaplens ready"), med.get("native ready")),
        ratio(med.get("lsan ready"), med.get("native ready"))))
    if not a.lsan:
        print("  LSan: clang -fsanitize=leak not available")
    for v, why in sorted(failed.items()):
        print("  %s: failed (%s)" % (v, why))


if __name__ == "__main__":
    sys.exit(main())
