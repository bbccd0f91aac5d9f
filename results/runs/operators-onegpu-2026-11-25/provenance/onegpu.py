"""The one-GPU correctness run: every rank of each manifest on this machine's one GPU.

    python3 packages/bench/gpu/onegpu.py <cases-dir> <out-dir>

<cases-dir> holds the manifests of ``src/gpu/emit-onegpu.ts`` (one folder per case). Steps:
1. host stream waits (``cuStreamWaitValue32``) on a plain uint32 tensor: one that is filled,
   one that never is (released by the host, recorded as a timeout);
2. ``python -m ovl_runtime run --ranks-on-one-gpu`` over every case, plus a copy of the first
   AG+GEMM case with one copy removed (it must end in a wait timeout, and the cases after it
   must still pass on the same GPU), reports to <out-dir>/reports;
3. a table of the reports. Times are not performance figures (all ranks share one GPU).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "packages" / "runtime-py" / "src"


def stream_waits_on_plain_tensors() -> dict[str, object]:
    sys.path.insert(0, str(SRC))
    import torch
    from torch._C._distributed_c10d import _SymmetricMemory

    print("stream-wait check: start", flush=True)

    from ovl_runtime._runner.streamwait import StreamWaits, sync_bounded

    # Load every kernel first: loading a module waits for the device's in-flight work, and a
    # stream blocked on a wait is in flight (a first _sleep behind a pending wait deadlocks).
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    sig = torch.zeros(4, dtype=torch.uint32, device="cuda")  # plain allocation, no symmetric memory
    waits = StreamWaits(sig, rank=0)
    waiter, writer = torch.cuda.Stream(), torch.cuda.Stream()
    src = torch.randn(1 << 20, device="cuda")
    dst = torch.zeros_like(src)
    dst.copy_(src)
    dst.zero_()
    torch.cuda.synchronize()
    waits.enqueue(waiter, slot=1, target=3)
    with torch.cuda.stream(waiter):
        dst.copy_(src, non_blocking=True)  # runs only once slot 1 reaches 3
    with torch.cuda.stream(writer):
        torch.cuda._sleep(20_000_000)
        _SymmetricMemory.stream_write_value32(sig, 1, 3)
    torch.cuda.current_stream().wait_stream(waiter)
    torch.cuda.current_stream().wait_stream(writer)
    print("stream-wait check: enqueued", flush=True)
    sync_bounded([waits], 5.0)
    print("stream-wait check: filled case synced", flush=True)
    filled = {"timeouts": list(waits.timeouts), "copied": bool(torch.equal(dst, src))}
    waits.enqueue(waiter, slot=2, target=7)  # nobody writes slot 2
    torch.cuda.current_stream().wait_stream(waiter)
    sync_bounded([waits], 0.5)
    never = {"timeouts": list(waits.timeouts), "slotAfterRelease": int(sig[2].item())}
    ok = filled == {"timeouts": [], "copied": True} and never["timeouts"] == [(0, 2, 0, 7)]
    return {"filled": filled, "neverFilled": never, "ok": ok}


def _cli_child(args: list[str]) -> None:
    """``python -m ovl_runtime`` with a traceback dump every 100 s, so that a hang shows where."""
    import faulthandler

    faulthandler.dump_traceback_later(100, repeat=True)
    sys.path.insert(0, str(SRC))
    from ovl_runtime._cli.main import main as cli_main

    raise SystemExit(cli_main(args))


def main() -> int:
    if sys.argv[1] == "--streamwait":
        import faulthandler

        faulthandler.dump_traceback_later(40, exit=True)
        sw = stream_waits_on_plain_tensors()
        Path(sys.argv[2]).write_text(json.dumps(sw, indent=2) + "\n")
        print("stream waits on a plain tensor:", json.dumps(sw), flush=True)
        return 0 if sw["ok"] else 1
    if sys.argv[1] == "--cli":
        _cli_child(sys.argv[2:])
    cases, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    manifests = sorted(cases.glob("*/manifest.json"), key=lambda p: (int(p.parent.name.split("_")[0][1:]), p.parent.name))
    first_ag = next(p for p in manifests if p.parent.name.endswith("ag_gemm"))
    broken = out / "cases" / f"{first_ag.parent.name}_missing_copy"
    shutil.copytree(first_ag.parent, broken, dirs_exist_ok=True)
    m = json.loads((broken / "manifest.json").read_text())
    m["name"] = f"{m['name']}_missing_copy"
    m["waitTimeoutNs"] = 500_000_000
    m["hostOps"][0]["streams"][0]["ops"].pop(0)  # rank 0's first chunk for rank 1 never comes
    (broken / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")
    at = next(i for i, p in enumerate(manifests) if p.parent.name.startswith("w4"))
    order = manifests[:at] + [broken / "manifest.json"] + manifests[at:]
    args = ["run", "--ranks-on-one-gpu", *map(str, order), "--out-dir", str(out / "reports")]
    print("$ python -m ovl_runtime", " ".join(args), flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    keep = ("case", "allocated", "check", "failure", "error", "done", "skipped", "summary", "timed")
    with open(out / "progress.jsonl", "w") as log:
        child = subprocess.Popen([sys.executable, __file__, "--cli", *args], stderr=subprocess.PIPE, text=True, env=env)
        assert child.stderr is not None
        watchdog = threading.Timer(float(os.environ.get("OVL_ONEGPU_LIMIT_S", "330")), child.kill)  # a hang must not cost the table
        watchdog.start()
        for line in child.stderr:
            log.write(line)
            log.flush()
            if not line.startswith("{"):
                print(line.rstrip()[:300], flush=True)
                continue
            e = json.loads(line)
            if e.get("event") in keep:
                e.pop("file", None)
                print(json.dumps(e)[:300], flush=True)
        code = child.wait()
        watchdog.cancel()
    print("exit code", code, "(3 expected: the case with a missing copy times out)", flush=True)
    try:
        sw = subprocess.run([sys.executable, __file__, "--streamwait", str(out / "streamwait.json")], env=env, timeout=90)
        print("stream-wait check exit code", sw.returncode, flush=True)
    except subprocess.TimeoutExpired:
        print("stream-wait check: timed out", flush=True)
    print(f"{'case':32} {'W':>2} {'ok':>5} {'checks':>6} {'max rel err':>11} {'failure':40} {'grids (SM budget)':30} {'ms*':>7}")
    for path in order:
        name = path.parent.name
        rp = out / "reports" / f"{name}.json"
        if not rp.exists():
            print(f"{name:32} (no report)")
            continue
        r = json.loads(rp.read_text())
        errs = [c["maxRelError"] for c in r["checks"]]
        worst = max((e for e in errs if e is not None), default=float("nan"))
        f = r["failures"][0] if r["failures"] else None
        why = f"{f['code']} rank {f.get('rank')} slot {f.get('slot')} {f.get('seen')}/{f.get('expected')}" if f else ""
        grids = ",".join(f"{k}={g[0]}" for k, g in r.get("extra", {}).get("smBudget", {}).get("grids", {}).items())
        ms = r["times"]["maxMedian"] if r["times"] else float("nan")
        print(f"{name:32} {r['world']:>2} {str(r['ok']):>5} {len(r['checks']):>6} {worst:>11.2e} {why[:40]:40} {grids[:30]:30} {ms:>7.3f}")
    print("* one-GPU times: all ranks share the GPU; not performance figures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
