"""ovl's ``nvshmem`` operators with several processes on ONE GPU (NVSHMEM's limited multiple-processes-per-GPU mode),
on NVSHMEM bootstrapped by the runner through nvshmem4py (``_runner.nvshmem_direct``). Needs one CUDA GPU, torch with
the nvidia-nvshmem-cu13 wheel, triton, nvshmem4py (``ovl-runtime[nvshmem]``) and manifests emitted elsewhere:

    node packages/cli/dist/bin.js emit ag-gemm --m 1024 --n 512 --k 512 --world W --backend nvshmem --out out-nvd/wW/ag-gemm
    node packages/cli/dist/bin.js emit gemm-rs --m 1024 --n 512 --k 512 --world W --backend nvshmem --out out-nvd/wW/gemm-rs

    # for a GPU machine without jsonschema (nvshmem_mpg.sh adds it to PYTHONPATH only when missing):
    python3 -m pip install --target out-nvd/deps --python-version 3.12 --only-binary=:all: \
        --platform manylinux2014_x86_64 --implementation cp jsonschema

    python3 packages/runtime-py/tests_gpu/nvshmem_mpg.py out-nvd OUT [--worlds 2 4] [--epochs 6]

``nvshmem_mpg.sh`` sets the environment (nvshmem4py from ``out-vendor/nvshmem4py``, unpacked from PyPI's
``nvshmem4py-cu13``) and runs this; on the device machine, carrying ``out-vendor`` and ``out-nvd``:

    bash packages/runtime-py/tests_gpu/nvshmem_mpg.sh out-nvd "$OUT" -- --timeout-s 170
 For each world W: every ``out-nvd/wW/*/manifest.json`` in one
``torchrun --nproc_per_node=W -m ovl_runtime run --epochs E`` with every process on GPU 0 (so the runner picks a gloo
group and direct NVSHMEM by itself), each epoch on fresh random bf16 inputs checked against the runner's float32
reference; reports in ``OUT/reports/wW``. Then the fault case (``nvshmem_mpg_fault.py``): rank 1 skips a launch, rank
0 must fail with ``WaitTimeout`` within its bound. Every torchrun is bounded (killed past ``--timeout-s``). Prints a
table last; exit 0 when every row passed. ``test_nvshmem_mpg_gpu.py`` runs the same through pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED_BACKEND = "NVSHMEM (nvshmem4py)"
FAULT_BOUND_NS = 2_000_000_000  # the fault case's wait bound (a copy of the manifest with waitTimeoutNs set to it)


@dataclass
class Row:
    case: str
    ok: bool
    detail: str
    extra: dict[str, object] = field(default_factory=dict)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = env.get("OVL_MPG_GPU", "0")  # every process on this one GPU
    env.pop("TORCH_SYMMMEM", None)
    env.pop("OVL_NVSHMEM", None)  # auto: the runner must pick direct by itself (local world > visible GPUs)
    return env


def torchrun(nproc: int, args: list[str], log: Path, timeout_s: float) -> tuple[int | None, float]:
    """``torchrun --standalone --nproc_per_node=nproc args``, output to ``log``; killed (return code None) past ``timeout_s``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args]
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with log.open("w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
        try:
            code: int | None = p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the group this call started: torchrun and its workers
            p.wait()
            code = None
    return code, time.monotonic() - t0


def run_world(manifests: Path, out: Path, world: int, epochs: int, timeout_s: float) -> list[Row]:
    """Every manifest of ``manifests/w<world>`` run and checked by ``ovl_runtime run`` with ``world`` processes on one GPU."""
    paths = sorted((manifests / f"w{world}").glob("*/manifest.json"))
    if not paths:
        return [Row(f"w{world}", False, f"no manifests under {manifests / f'w{world}'}")]
    reports = out / "reports" / f"w{world}"
    if reports.exists():
        shutil.rmtree(reports)
    args = ["-m", "ovl_runtime", "run", *map(str, paths), "--out-dir", str(reports), "--epochs", str(epochs)]
    code, wall = torchrun(world, args, out / "logs" / f"run-w{world}.log", timeout_s)
    rows = []
    for p in paths:
        name = f"w{world} {p.parent.name}"
        report = reports / f"{p.parent.name}.json"
        if not report.exists():
            rows.append(Row(name, False, f"no report (torchrun exit {code}, {wall:.0f} s; see logs/run-w{world}.log)"))
            continue
        r = json.loads(report.read_text())
        checks = r.get("checks") or []
        worst = max((c.get("maxRelError", float("inf")) for c in checks), default=float("nan"))
        backend = r.get("backends", {}).get("symmetricMemory")
        failures = [f.get("code") for f in r.get("failures", [])]
        ok = bool(r.get("ok")) and len(checks) == epochs and backend == EXPECTED_BACKEND
        median = (r.get("times") or {}).get("maxMedian")
        detail = f"{len(checks)}/{epochs} checks, max rel err {worst:.2e}, backend {backend}" + (
            f", failures {failures}" if failures else ""
        )
        rows.append(Row(name, ok, detail, {"maxMedianMs": median, "exit": code}))
    return rows


def run_fault(manifests: Path, out: Path, timeout_s: float) -> Row:
    """Rank 1 stalls in an epoch of w2 AG+GEMM; rank 0 must raise ``WaitTimeout`` within a bound, and no process hang."""
    src = manifests / "w2" / "ag-gemm"
    if not (src / "manifest.json").exists():
        return Row("fault w2 ag-gemm", False, f"no manifest {src / 'manifest.json'}")
    case = out / "fault" / "manifest"
    if case.exists():
        shutil.rmtree(case)
    shutil.copytree(src, case)
    d = json.loads((case / "manifest.json").read_text())
    d["waitTimeoutNs"] = FAULT_BOUND_NS
    (case / "manifest.json").write_text(json.dumps(d, indent=2))
    for old in (out / "fault").glob("fault-rank*.json"):
        old.unlink()
    code, wall = torchrun(
        2, [str(HERE / "nvshmem_mpg_fault.py"), str(case / "manifest.json"), str(out / "fault"), "1"], out / "logs" / "fault.log", timeout_s
    )
    ranks = {}
    for r in (0, 1):
        p = out / "fault" / f"fault-rank{r}.json"
        ranks[r] = json.loads(p.read_text()) if p.exists() else {"step": "never started"}
    r0 = ranks[0]
    err = r0.get("error") or {}
    elapsed = r0.get("elapsedS")
    bound = FAULT_BOUND_NS / 1e9
    # Each device wait gives up after the bound; a program can meet several unfilled waits in a row: allow a few.
    limit = 8 * bound + 10
    ok = (
        code == 0
        and r0.get("step") == "finalized"
        and ranks[1].get("step") == "finalized"
        and isinstance(err, dict)
        and err.get("code") == "wait-timeout"
        and err.get("rank") == 0
        and (ranks[1].get("error") or {}).get("code") == "wait-timeout"
        and isinstance(elapsed, (int, float))
        and elapsed < limit
    )
    detail = (
        f"rank 0: {err.get('code') if isinstance(err, dict) else err} after {elapsed if elapsed is None else round(float(elapsed), 2)} s "
        f"(bound {bound:g} s per wait, limit {limit:g} s), rank 1: {(ranks[1].get('error') or {}).get('code')}; "
        f"last steps {r0.get('step')}/{ranks[1].get('step')}; torchrun exit {code}, {wall:.0f} s"
    )
    return Row("fault w2 ag-gemm (rank 1 stalls)", ok, detail, {"message": err.get("message") if isinstance(err, dict) else None})


def table(rows: list[Row]) -> str:
    width = max(len(r.case) for r in rows)
    lines = [f"{'case':{width}}  {'result':6}  detail", f"{'-' * width}  ------  ------"]
    for r in rows:
        lines.append(f"{r.case:{width}}  {'PASS' if r.ok else 'FAIL':6}  {r.detail}")
    passed = sum(r.ok for r in rows)
    lines.append(f"{passed} passed, {len(rows) - passed} failed")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifests", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--timeout-s", type=float, default=240.0, help="bound of each torchrun (killed past it)")
    ap.add_argument("--no-fault", action="store_true")
    args = ap.parse_args()
    rows: list[Row] = []
    for w in args.worlds:
        rows += run_world(args.manifests, args.out, w, args.epochs, args.timeout_s)
    if not args.no_fault:
        rows.append(run_fault(args.manifests, args.out, args.timeout_s))
    (args.out / "summary.json").write_text(json.dumps([r.__dict__ for r in rows], indent=2))
    print(table(rows), flush=True)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
