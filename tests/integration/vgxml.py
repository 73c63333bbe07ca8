#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A reader of Valgrind's XML output, protocol 4 (Valgrind's docs/internals/
xml-output-protocol4.txt), used on memcheck's own XML and on heaplens memcheck's alike.

  vgxml.py summary FILE.xml          what the reader makes of a file (JSON)
  vgxml.py compare NAME A.xml B.xml  PASS/FAIL lines: do the two agree on the error kinds, the
                                     leaked bytes and blocks per kind, and the function at the
                                     top of each stack?
  vgxml.py root FILE.xml...          of one file per process (--xml-file=x.%p.xml), the one of
                                     the process the others descend from
"""
import collections
import json
import re
import sys
import xml.etree.ElementTree as ET

LEAK_KINDS = ("Leak_DefinitelyLost", "Leak_IndirectlyLost", "Leak_PossiblyLost",
              "Leak_StillReachable")
# The allocator's replacement that sits on top of memcheck's stacks, in either tool.
ALLOCATOR_OBJS = ("vgpreload_memcheck", "libheaplens.so")


class ProtocolError(Exception):
    pass


def _text(el, tag, required=True):
    child = el.find(tag)
    if child is None or child.text is None:
        if required:
            raise ProtocolError("<%s> without <%s>" % (el.tag, tag))
        return None
    return child.text.strip()


def _int(el, tag):
    t = _text(el, tag)
    try:
        return int(t, 0)
    except ValueError:
        raise ProtocolError("<%s> is not a number: %r" % (tag, t))


def _frames(stack):
    frames = []
    for fr in stack.findall("frame"):
        ip = _text(fr, "ip")
        if not re.fullmatch(r"0x[0-9A-Fa-f]+", ip):
            raise ProtocolError("<ip> is not HEX64: %r" % ip)
        line = _text(fr, "line", False)
        frames.append({"ip": ip, "obj": _text(fr, "obj", False), "fn": _text(fr, "fn", False),
                       "dir": _text(fr, "dir", False), "file": _text(fr, "file", False),
                       "line": int(line) if line else None})
    if not frames:
        raise ProtocolError("a <stack> without frames")
    return frames


def is_allocator(frame):
    return any(o in (frame.get("obj") or "") for o in ALLOCATOR_OBJS)


# memcheck 3.19's replacements of these call its memalign, which is then the top frame.
ALIGNED_ALLOCATORS = ("posix_memalign", "aligned_alloc", "valloc", "memalign")


def plain_name(fn):
    """'operator delete(void*, unsigned long)' -> 'operator delete'; 'f(int)' -> 'f';
    '__strdup' -> 'strdup' (glibc's aliases of one address: the tools pick different ones)."""
    if fn is None:
        return "???"
    if fn.startswith("operator"):
        m = re.match(r"operator\s*(new\[\]|delete\[\]|new|delete)", fn)
        if m:
            return "operator " + m.group(1)
    fn = re.sub(r"\(.*\)$", "", fn)
    return "memalign" if fn in ALIGNED_ALLOCATORS else fn.lstrip("_")


def read(path):
    """The file as {pid, ppid, tool, errors: [...], errorcounts: {unique: n}, suppcounts}."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise ProtocolError("not XML: %s" % e)
    if root.tag != "valgrindoutput":
        raise ProtocolError("root is <%s>, not <valgrindoutput>" % root.tag)
    if _text(root, "protocolversion") != "4":
        raise ProtocolError("protocol version %s, not 4" % _text(root, "protocolversion"))
    tool = _text(root, "protocoltool")
    # A forked child's file has no RUNNING status (memcheck writes its preamble once).
    states = [_text(s, "state") for s in root.findall("status")]
    if "FINISHED" not in states or states.count("RUNNING") > 1:
        raise ProtocolError("status states %s" % states)
    out = {"pid": _int(root, "pid"), "ppid": _int(root, "ppid"), "tool": tool, "errors": [],
           "errorcounts": {}, "suppcounts": {}}
    for err in root.findall("error"):
        e = {"unique": _text(err, "unique"), "tid": _int(err, "tid"), "kind": _text(err, "kind")}
        stacks = err.findall("stack")
        if not stacks:
            raise ProtocolError("<error> %s without <stack>" % e["unique"])
        e["stack"] = _frames(stacks[0])
        e["aux"] = [_frames(s) for s in stacks[1:]]
        xwhat = err.find("xwhat")
        if e["kind"] in LEAK_KINDS:
            if xwhat is None:
                raise ProtocolError("leak error without <xwhat>")
            e["what"] = _text(xwhat, "text")
            e["leakedbytes"] = _int(xwhat, "leakedbytes")
            e["leakedblocks"] = _int(xwhat, "leakedblocks")
        else:
            e["what"] = _text(err, "what") if xwhat is None else _text(xwhat, "text")
        sup = err.find("suppression")
        if sup is not None:
            e["suppression"] = _text(sup, "rawtext")
        out["errors"].append(e)
    counts = root.find("errorcounts")
    if counts is None:
        raise ProtocolError("no <errorcounts>")
    for pair in counts.findall("pair"):
        out["errorcounts"][_text(pair, "unique")] = _int(pair, "count")
    # memcheck leaves <suppcounts> out under -q
    for pair in root.findall("suppcounts/pair"):
        out["suppcounts"][_text(pair, "name")] = _int(pair, "count")
    return out


def top_functions(stack):
    """The allocator's function on top (or None) and the program's innermost one."""
    alloc = plain_name(stack[0]["fn"]) if is_allocator(stack[0]) else None
    user = next((f for f in stack if not is_allocator(f)), None)
    return alloc, plain_name(user["fn"]) if user else None


def digest(doc):
    """What two tools must agree on: heap errors by (kind, top functions) with their counts,
    leaked bytes and blocks per kind, and per (kind, top functions)."""
    errors = collections.Counter()
    leaks = {k: [0, 0] for k in LEAK_KINDS}
    records = collections.defaultdict(lambda: [0, 0])
    for e in doc["errors"]:
        alloc, user = top_functions(e["stack"])
        if e["kind"] in LEAK_KINDS:
            leaks[e["kind"]][0] += e["leakedbytes"]
            leaks[e["kind"]][1] += e["leakedblocks"]
            rec = records[(e["kind"], alloc, user)]
            rec[0] += e["leakedbytes"]
            rec[1] += e["leakedblocks"]
        else:
            errors[(e["kind"], user)] += doc["errorcounts"].get(e["unique"], 1)
    return {"errors": dict(errors), "leaks": leaks, "records": dict(records)}


def compare(name, a_path, b_path):
    """Lines PASS/FAIL for A (the reference) against B."""
    lines = []
    try:
        a, b = read(a_path), read(b_path)
    except (OSError, ProtocolError) as e:
        return ["FAIL %s: protocol: %s" % (name, e)]
    da, db = digest(a), digest(b)
    ok = True
    if da["errors"] != db["errors"]:
        ok = False
        lines.append("FAIL %s errors: %s != %s" % (name, sorted(da["errors"].items()),
                                                    sorted(db["errors"].items())))
    for k in LEAK_KINDS:
        if da["leaks"][k] != db["leaks"][k]:
            ok = False
            lines.append("FAIL %s %s: bytes, blocks %s != %s" % (name, k, da["leaks"][k],
                                                                  db["leaks"][k]))
    if da["records"] != db["records"]:
        ok = False
        only_a = {k: v for k, v in da["records"].items() if db["records"].get(k) != v}
        only_b = {k: v for k, v in db["records"].items() if da["records"].get(k) != v}
        lines.append("FAIL %s loss records by top functions: %s != %s" % (name, only_a, only_b))
    if ok:
        n = sum(da["errors"].values()) + len(da["records"])
        lines.append("PASS %s (%d heap errors and loss-record groups agree)" % (name, n))
    return lines


def main(argv):
    if len(argv) == 3 and argv[1] == "summary":
        print(json.dumps(read(argv[2]), indent=1))
        return 0
    if len(argv) == 5 and argv[1] == "compare":
        lines = compare(argv[2], argv[3], argv[4])
        print("\n".join(lines))
        return 0 if all(l.startswith("PASS") for l in lines) else 1
    if len(argv) >= 3 and argv[1] == "root":
        try:
            docs = {p: read(p) for p in argv[2:]}
        except ProtocolError as e:
            print("", file=sys.stderr)
            print("vgxml.py: %s" % e, file=sys.stderr)
            return 1
        pids = {d["pid"] for d in docs.values()}
        roots = [p for p, d in docs.items() if d["ppid"] not in pids]
        print(roots[0] if len(roots) == 1 else "")
        return 0 if len(roots) == 1 else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
