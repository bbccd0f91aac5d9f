"""``python -m ovl_runtime run <manifest.json>``: run a manifest on GPUs or emulated.

Progress goes to stderr as JSON lines (``{"event": ...}``); the report goes to ``--out``
(or stdout). Exit codes: 0 ok, 1 check failed, 2 bad manifest or usage, 3 wait timeout.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from typing import Any

from .env import set_safe_env
from .errors import EXIT_BAD_MANIFEST, DeviceError, RunnerError
from .manifest import load_manifest


def _is_rank0() -> bool:
    return os.environ.get("RANK", "0") == "0"


def emit(event: dict[str, Any]) -> None:
    """One progress line on stderr (rank 0 only under torchrun)."""
    if _is_rank0():
        print(json.dumps(event), file=sys.stderr, flush=True)


def gpu_available() -> bool:
    """Whether torch and triton import and a CUDA device is visible."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m ovl_runtime", description="Run ovl manifests on GPUs (under torchrun) or emulated on the CPU.")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a manifest, check it against a reference, time it, write a report")
    run.add_argument("manifest", help="path of an ovl.manifest/v1 JSON file")
    run.add_argument("--emulate", action="store_true", help="run on the CPU (ranks as threads over numpy arrays)")
    run.add_argument("--out", help="write the report here (default: stdout)")
    run.add_argument("--baselines", action="store_true", help="also time torch GEMM, NCCL collective, both in sequence, and PyTorch async-TP")
    run.add_argument("--epochs", type=int, help="checked launches in a row (default: timing.checkRuns)")
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run.add_argument("--timeout-s", type=float, help="emulation only: bound of every wait in seconds (default: waitTimeoutNs)")
    run.add_argument("--symm-backend", choices=("cuda", "nvshmem"), default="cuda", help="PyTorch symmetric-memory backend (GPU mode)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    set_safe_env(args.symm_backend)
    if args.epochs is not None and args.epochs < 1:
        emit({"event": "error", "code": "usage", "message": "--epochs must be >= 1"})
        return EXIT_BAD_MANIFEST
    try:
        m = load_manifest(args.manifest)
    except RunnerError as exc:
        emit({"event": "error", **exc.to_json()})
        return exc.exit_code
    emulated = args.emulate or not gpu_available()
    emit({"event": "start", "manifest": m.name, "world": m.world, "mode": "emulate" if emulated else "gpu"})
    try:
        if emulated:
            if not _is_rank0():
                return 0  # under torchrun without GPUs: rank 0 emulates every rank
            from .emulate import emulate

            outcome = emulate(m, epochs=args.epochs, seed=args.seed, timeout_s=args.timeout_s, on_progress=emit)
        else:
            from .gpu import run_gpu

            outcome = run_gpu(m, epochs=args.epochs, seed=args.seed, baselines=args.baselines, symm_backend=args.symm_backend, on_progress=emit)
    except RunnerError as exc:
        emit({"event": "error", **exc.to_json()})
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the GPU stack's own errors, reported as values
        err = DeviceError(f"{type(exc).__name__}: {exc}")
        emit({"event": "error", **err.to_json()})
        return err.exit_code
    from .report import build_report, write_report

    report = build_report(m, outcome)
    if _is_rank0():
        write_report(report, args.out)
    if outcome.failures:
        emit({"event": "error", **outcome.failures[0].to_json()})
    emit({"event": "done", "ok": outcome.ok, "exitCode": outcome.exit_code})
    return outcome.exit_code
