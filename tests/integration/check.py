#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# check.py - assertions on a heaplens JSON report, one PASS/FAIL line each.
#
#   check.py CASE REPORT.json 'EXPR' ['EXPR' ...]
#   check.py --same CASE A.json B.json KEY [KEY ...]   one line: the KEYs (dotted paths: end.how)
#                                                      of both reports agree
#
# Each EXPR is a Python expression, normally one comparison ("calls['malloc'] == 11"); on
# failure the line shows the value the left side had. Names available to an EXPR:
#   j                        the whole report
#   process end scanned totals calls leaks records errors children   its parts
#   lb(kind) ln(kind)        leaks[kind]['bytes'] / ['blocks']; kind may be short:
#                            definite indirect possible reachable unscanned
#   rec(kind, fn)            {'bytes', 'blocks', 'records'} summed over the leak records of that
#                            kind (None: any) whose stack has a frame whose function contains fn
#   names(fn)                sorted kinds of the leak records whose stack names fn ([] if none)
#   frame(kind, fn)          the first frame naming fn in a matching record ({} if none)
#   errs(kind, fn=None)      number of errors of that kind (None: any) whose stack names fn
#   errs_alloc(kind, fn)     number of errors of that kind whose alloc_stack names fn
#   error_kinds()            sorted list of the error kinds
#   maxdepth()               the longest stack among the leak records
# Exit status: 0 when every assertion passed, 1 otherwise.
import ast
import json
import sys

KINDS = {
    "definite": "definitely_lost",
    "indirect": "indirectly_lost",
    "possible": "possibly_lost",
    "reachable": "still_reachable",
    "unscanned": "unscanned",
}


def full_kind(kind):
    return KINDS.get(kind, kind)


def fn_in(stack, fn):
    for fr in stack or []:
        name = fr.get("function") or ""
        if fn in name:
            return fr
    return None


def make_env(j):
    records = j.get("leak_records", [])
    errors = j.get("errors", [])
    leaks = j.get("leaks", {})

    def matching(kind, fn):
        k = full_kind(kind) if kind else None
        for r in records:
            if k and r.get("kind") != k:
                continue
            if fn is not None and not fn_in(r.get("stack"), fn):
                continue
            yield r

    def rec(kind, fn):
        out = {"bytes": 0, "blocks": 0, "records": 0}
        for r in matching(kind, fn):
            out["bytes"] += r.get("bytes", 0)
            out["blocks"] += r.get("blocks", 0)
            out["records"] += 1
        return out

    def names(fn):
        return sorted({r.get("kind") for r in matching(None, fn)})

    def frame(kind, fn):
        for r in matching(kind, fn):
            return fn_in(r.get("stack"), fn)
        return {}

    def errs(kind=None, fn=None):
        n = 0
        for e in errors:
            if kind and e.get("kind") != kind:
                continue
            if fn is not None and not fn_in(e.get("stack"), fn):
                continue
            n += 1
        return n

    def errs_alloc(kind, fn):
        return sum(1 for e in errors if (not kind or e.get("kind") == kind) and fn_in(e.get("alloc_stack"), fn))

    def errs_release(kind, fn):
        return sum(1 for e in errors if (not kind or e.get("kind") == kind) and fn_in(e.get("release_stack"), fn))

    return {
        "j": j,
        "errs_release": errs_release,
        "process": j.get("process", {}),
        "end": j.get("end", {}),
        "scanned": j.get("scanned"),
        "totals": j.get("totals", {}),
        "calls": j.get("calls", {}),
        "leaks": leaks,
        "records": records,
        "errors": errors,
        "children": j.get("children", []),
        "lb": lambda kind: leaks[full_kind(kind)]["bytes"],
        "ln": lambda kind: leaks[full_kind(kind)]["blocks"],
        "rec": rec,
        "names": names,
        "frame": frame,
        "errs": errs,
        "errs_alloc": errs_alloc,
        "error_kinds": lambda: sorted(e.get("kind") for e in errors),
        "maxdepth": lambda: max([len(r.get("stack") or []) for r in records] or [0]),
        "len": len,
        "sorted": sorted,
        "any": any,
        "all": all,
        "sum": sum,
        "range": range,
    }


def short(v):
    s = repr(v)
    return s if len(s) <= 300 else s[:297] + "..."


def evaluate(expr, env):
    """Returns (ok, detail)."""
    tree = ast.parse(expr, mode="eval")
    body = tree.body
    if isinstance(body, ast.Compare) and len(body.ops) == 1:
        left = eval(compile(ast.Expression(body.left), "<lhs>", "eval"), env)
        right = eval(compile(ast.Expression(body.comparators[0]), "<rhs>", "eval"), env)
        probe = {"a": left, "b": right}
        op = type(body.ops[0])
        ops = {
            ast.Eq: "a == b", ast.NotEq: "a != b", ast.Lt: "a < b", ast.LtE: "a <= b",
            ast.Gt: "a > b", ast.GtE: "a >= b", ast.In: "a in b", ast.NotIn: "a not in b",
            ast.Is: "a is b", ast.IsNot: "a is not b",
        }
        ok = bool(eval(ops[op], {}, probe))
        return ok, "got %s" % short(left)
    v = eval(compile(tree, "<expr>", "eval"), env)
    return bool(v), "got %s" % short(v)


def load(path):
    with open(path) as f:
        return json.load(f)


def same(case, a, b, keys):
    try:
        ja, jb = load(a), load(b)
    except (OSError, ValueError) as e:
        print("FAIL %s: cannot read both reports: %s" % (case, e))
        return 1
    def get(j, key):  # "end.how": a dotted path
        for part in key.split("."):
            j = j.get(part) if isinstance(j, dict) else None
        return j

    diff = [k for k in keys if get(ja, k) != get(jb, k)]
    if diff:
        k = diff[0]
        print("FAIL %s: %s differs: %s vs %s" % (case, ",".join(diff), short(get(ja, k)), short(get(jb, k))))
        return 1
    print("PASS %s" % case)
    return 0


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "--same":
        return same(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    if len(sys.argv) < 3:
        print("usage: check.py CASE REPORT.json EXPR...", file=sys.stderr)
        return 2
    case, path, exprs = sys.argv[1], sys.argv[2], sys.argv[3:]
    env, why = None, None
    try:
        with open(path) as f:
            env = make_env(json.load(f))
    except FileNotFoundError:
        why = "no JSON report at %s" % path
    except (OSError, ValueError) as e:
        why = "unreadable JSON report %s: %s" % (path, e)
    failed = 0
    for expr in exprs:
        if env is None:
            print("FAIL %s: %s: %s" % (case, expr, why))
            failed += 1
            continue
        try:
            ok, detail = evaluate(expr, env)
        except Exception as e:  # a missing key is a failed check, not a crash
            ok, detail = False, "%s: %s" % (type(e).__name__, e)
        if ok:
            print("PASS %s: %s" % (case, expr))
        else:
            print("FAIL %s: %s: %s" % (case, expr, detail))
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
