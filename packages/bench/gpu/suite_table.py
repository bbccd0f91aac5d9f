"""Prints (and optionally writes as markdown) the table of a merged suite report.

    python3 packages/bench/gpu/suite_table.py suite.json [--md out.md]
"""
import json
import sys


def rows(merged):
    for name, r in sorted(merged.items()):
        t = (r.get("times") or {}).get("maxMedian")
        base = {b["name"]: b.get("maxMedian", b.get("ms")) for b in r.get("baselines") or []}
        checks = r.get("checks") or []
        ok = all(c.get("ok") for c in checks) and bool(checks) and not r.get("failures")
        err = max((c.get("maxRelError") or 0) for c in checks) if checks else None
        yield name, r.get("world"), t, base, len(checks), ok, err, r.get("failures")


def main():
    merged = json.load(open(sys.argv[1]))
    out = []
    for name, world, t, base, n, ok, err, failures in rows(merged):
        b = " ".join(f"{k}={v:.3f}" for k, v in base.items() if isinstance(v, (int, float)))
        ts = f"{t:.3f}" if isinstance(t, (int, float)) else "—"
        out.append(f"{name:28} w{world} ovl={ts} checks={n} ok={ok} maxerr={err} {b} {'' if not failures else json.dumps(failures)[:300]}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
