"""``python -m ovl_runtime run <manifest.json> [...]``: run manifests on GPUs or emulated.

Progress goes to stderr as JSON lines (``{"event": ...}``). One manifest: the report goes
to ``--out`` (or stdout). Several manifests (all of one ``world``) run one after the other
in one process, one process group on GPUs (``--ranks-on-one-gpu``: every rank of each
manifest in this one process on one GPU, worlds may differ); each report goes to ``--out-dir`` (see
``report_names``). Exit codes: 0 ok, 1 check failed, 2 bad manifest or usage, 3 wait
timeout; with several manifests, the largest of theirs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .._emulate.engine import ENGINES
from .._kernels.library import (
    LIBRARY_DTYPES,
    LIBRARY_OPERATORS,
    LIBRARY_TARGETS,
    ROWS_OPERATORS,
    KernelKey,
    cache_dir,
    call_key,
    ensure_compiled,
    rows_key,
)
from .._manifest.parse import load_manifest
from .._manifest.types import Manifest
from .._report.outcome import RunOutcome
from .._runner.env import SYMM_CHOICES, process_backends, select_symm_backend, set_safe_env
from ..errors import EXIT_BAD_MANIFEST, EXIT_OK, DeviceError, RunnerError, UsageError

ProgressFn = Callable[[dict[str, Any]], None]


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
    ap = argparse.ArgumentParser(
        prog="python -m ovl_runtime", description="Run ovl manifests on GPUs (under torchrun) or emulated on the CPU."
    )
    sub = ap.add_subparsers(dest="command", required=True)
    kernels = sub.add_parser(
        "kernels",
        help="compile an operator of the torch API for one shape into a kernel library (needs ovl's compiler: OVL_CLI, the one bundled with this package, or `ovl` on the PATH)",
    )
    kernels.add_argument("op", choices=LIBRARY_OPERATORS, help="the operator")
    kernels.add_argument("--world", type=int, required=True, help="ranks of the group")
    kernels.add_argument("--m", type=int, help="rows M of the GEMM (ag-gemm: gathered; gemm-rs: before the scatter); not with --any-rows")
    kernels.add_argument("--n", type=int, required=True, help="columns N of this rank's GEMM")
    kernels.add_argument("--k", type=int, required=True, help="depth K of this rank's GEMM")
    kernels.add_argument("--heads", type=int, default=0, help="ag-attention: query heads H (N = H x head_dim)")
    kernels.add_argument("--causal", action="store_true", help="ag-attention: causal masking")
    kernels.add_argument(
        "--dtype",
        choices=LIBRARY_DTYPES,
        default="bf16",
        help="element type of the tensors (default bf16; fp8e4m3: ag-gemm only, fp8 operands with per-tensor scales)",
    )
    kernels.add_argument("--experts", type=int, default=0, help="ag-moe / moe-rs: experts E")
    kernels.add_argument("--topk", type=int, default=0, help="ag-moe / moe-rs: experts per token k")
    kernels.add_argument("--into", help="the library directory (default: the cache, $OVL_CACHE_DIR or ~/.cache/ovl/kernels)")
    kernels.add_argument(
        "--per-m",
        action="store_true",
        help=f"{', '.join(ROWS_OPERATORS)}: the operator of this row count alone, not the one for every row count the torch API uses by default",
    )
    kernels.add_argument(
        "--target",
        choices=LIBRARY_TARGETS,
        help="whose tuned table decides ag-gemm / gemm-rs / gemm-ar / a2a-gemm tiles (default: $OVL_TARGET, else the compiler's default)",
    )
    kernels.add_argument(
        "--any-rows",
        action="store_true",
        help=f"{', '.join(ROWS_OPERATORS)}: the operator for every row count the torch API binds by default (OVL_ANY_ROWS), instead of one M",
    )
    kernels.add_argument(
        "--candidates",
        type=int,
        default=0,
        metavar="K",
        help="also the on-device tuner's K candidate configurations (ovl candidates) and their list, so OVL_TUNE=1 runs "
        "where no compiler is (ag-gemm, gemm-rs)",
    )
    kernels.add_argument(
        "--tlx",
        action="store_true",
        help="ag-gemm, gemm-rs: the TLX backend's kernels of this row count, AOT-compiled with fbtriton ($OVL_TLX_PYTHON, else "
        "@ovl/tlx-emitter's .venv-tlx) into <dirname>-tlx, which the torch API takes where the tuned table measured them faster",
    )
    chain = sub.add_parser("chain", help="run an ovl.chain/v1 (operators back to back, e.g. `ovl emit mlp`) emulated on the CPU")
    chain.add_argument("chain", help="path of the chain JSON file")
    chain.add_argument("--engine", choices=("auto", "numpy", "interpret"), default="auto", help="CPU emulation engine")
    chain.add_argument("--epochs", type=int, default=1, help="checked launches of the whole chain")
    chain.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run = sub.add_parser("run", help="run manifests, check them against a reference, time them, write their reports")
    run.add_argument(
        "manifests", nargs="+", metavar="manifest", help="path of an ovl.manifest/v1 JSON file; several (of one world) run in one process"
    )
    run.add_argument("--emulate", action="store_true", help="run on the CPU (ranks as threads); --emulate=ENGINE also picks the engine")
    run.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="emulation engine: numpy (the templates re-implemented in numpy), interpret (the kernels' own source under "
        "Triton's CPU interpreter; needs torch and triton) or auto (numpy when every kernel has a numpy template, else interpret); "
        "numpy or interpret imply --emulate",
    )
    out = run.add_mutually_exclusive_group()
    out.add_argument("--out", help="one manifest: write the report here (default: stdout)")
    out.add_argument(
        "--out-dir",
        help="write each report to DIR/<name>.json (required with several manifests): <name> is the "
        "manifest's folder name for a file called manifest.json, else the file name without .json",
    )
    run.add_argument(
        "--baselines", action="store_true", help="also time torch GEMM, NCCL collective, both in sequence, and PyTorch async-TP"
    )
    run.add_argument("--epochs", type=int, help="checked launches in a row (default: timing.checkRuns)")
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run.add_argument(
        "--timeout-s",
        type=float,
        help="emulation only: bound of every wait in seconds, from the waited slot's last change in the numpy engine (default: waitTimeoutNs)",
    )
    run.add_argument(
        "--symm-backend",
        choices=SYMM_CHOICES,
        default="auto",
        help="PyTorch symmetric-memory backend under torchrun (default auto: NVSHMEM when a manifest puts through NVSHMEM, "
        "else CUDA; one process runs one backend). Processes sharing a GPU (CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=2) "
        "run nvshmem manifests on NVSHMEM bootstrapped through nvshmem4py instead, PyTorch's staying on CUDA "
        "(OVL_NVSHMEM=auto|direct|torch chooses; pip install 'ovl-runtime[nvshmem]')",
    )
    run.add_argument(
        "--ranks-on-one-gpu",
        action="store_true",
        help="run all ranks of each manifest in this one process on one GPU (no torchrun; worlds may differ): "
        "checks correctness; its times are not performance figures",
    )
    return ap


def report_name(path: str | Path) -> str:
    """The report's file name stem in ``--out-dir``: the folder's name for ``<case>/manifest.json``, else the file's stem."""
    p = Path(os.path.abspath(path))  # the folder as named, not a link's target
    if p.name == "manifest.json":
        return p.parent.name
    return p.stem


def report_names(paths: Sequence[str]) -> list[str]:
    """``report_name`` of every manifest; two manifests whose reports would share a file are a ``UsageError``."""
    names = [report_name(p) for p in paths]
    seen: dict[str, str] = {}
    for path, name in zip(paths, names):
        if name in seen:
            raise UsageError(f"{seen[name]} and {path} would both write {name}.json: give each manifest its own folder or file name")
        seen[name] = path
    return names


def _usage(message: str) -> int:
    emit({"event": "error", **UsageError(message).to_json()})
    return EXIT_BAD_MANIFEST


def _split_emulate(argv: Sequence[str]) -> list[str]:
    """``--emulate=ENGINE`` is ``--emulate --engine ENGINE`` (a bare ``--emulate`` takes no value,
    so that it never swallows a manifest path)."""
    out: list[str] = []
    for a in argv:
        if a.startswith("--emulate="):
            out += ["--emulate", "--engine", a.split("=", 1)[1]]
        else:
            out.append(a)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(_split_emulate(sys.argv[1:] if argv is None else argv))
    if args.command == "kernels":
        return _kernels(args)
    if args.command == "chain":
        return _chain(args)
    paths: list[str] = args.manifests
    if args.epochs is not None and args.epochs < 1:
        return _usage("--epochs must be >= 1")
    one_gpu_problem = _one_gpu_usage(args)
    if one_gpu_problem is not None:
        return _usage(one_gpu_problem)
    if len(paths) > 1 and args.out_dir is None:
        return _usage(f"{len(paths)} manifests need --out-dir DIR (one report per manifest); --out and stdout take one")
    names: list[str] = []
    if args.out_dir is not None:
        try:
            names = report_names(paths)
        except UsageError as exc:
            return _usage(str(exc))
    manifests: list[Manifest] = []
    for path in paths:  # every manifest is loaded, and of one world, before anything runs
        try:
            m = load_manifest(path)
            if manifests and m.world != manifests[0].world and not args.ranks_on_one_gpu:
                raise UsageError(
                    f"world {m.world}, but {paths[0]} has world {manifests[0].world}: the manifests of one run share one world"
                )
        except RunnerError as exc:
            event = {"event": "error", **exc.to_json()}
            if len(paths) > 1:
                event.update({"message": f"{path}: {exc}", "file": path})
            emit(event)
            return exc.exit_code
        manifests.append(m)
    try:
        _select_backend(args, manifests)
    except UsageError as exc:
        return _usage(str(exc))
    if args.out_dir is not None and _is_rank0():
        try:
            Path(args.out_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return _usage(f"cannot create --out-dir {args.out_dir}: {exc.strerror or exc}")
    if args.ranks_on_one_gpu:  # before CUDA starts: one hardware queue per stream (gpu_onegpu)
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    emulated = args.emulate or args.engine != "auto" or not gpu_available()
    if args.ranks_on_one_gpu and emulated:
        return _usage(
            "--ranks-on-one-gpu needs torch, triton and a CUDA device, and this machine has none "
            "(run without it, with --emulate, to check the manifest on the CPU)"
        )
    if args.out_dir is None:
        return _run_one(args, manifests[0], emulated)
    return _run_many(args, manifests, paths, names, emulated)


def _select_backend(args: argparse.Namespace, manifests: list[Manifest]) -> None:
    """The environment of the run, before torch is imported for the GPU: the multicast switches, and under torchrun
    the symmetric-memory backend the manifests need (``--symm-backend``, default NVSHMEM when one puts through NVSHMEM).
    Emulation and the one-GPU mode allocate nothing through it. A ``UsageError`` when it cannot be had: a manifest
    that needs NVSHMEM under ``--symm-backend cuda``, or torch imported with another backend on a machine with a GPU."""
    if args.emulate or args.engine != "auto" or args.ranks_on_one_gpu:
        set_safe_env("cuda")
        return
    # NVSHMEM bootstrapped by ovl (processes sharing a GPU, or OVL_NVSHMEM=direct) leaves PyTorch's on CUDA.
    backend, _heap = process_backends(manifests, args.symm_backend)
    try:
        select_symm_backend(backend)
    except UsageError:
        if gpu_available():
            raise
        set_safe_env("cuda")  # no GPU: the run is emulated, and needs no symmetric memory


def _one_gpu_usage(args: argparse.Namespace) -> str | None:
    """Why ``--ranks-on-one-gpu`` cannot go with the other options, or None."""
    if not args.ranks_on_one_gpu:
        return None
    if args.emulate or args.engine != "auto":
        return "--ranks-on-one-gpu runs on a GPU; --emulate / --engine run on the CPU: choose one"
    if args.baselines:
        return "--baselines times NCCL collectives across GPUs; with --ranks-on-one-gpu there are none"
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return "--ranks-on-one-gpu runs every rank in one process: start it with python -m ovl_runtime, not torchrun"
    return None


def _mode(args: argparse.Namespace, emulated: bool) -> str:
    return "emulate" if emulated else "one-gpu" if args.ranks_on_one_gpu else "gpu"


def _run_one(args: argparse.Namespace, m: Manifest, emulated: bool) -> int:
    """One manifest, its report to ``--out`` or stdout."""
    emit({"event": "start", "manifest": m.name, "world": m.world, "mode": _mode(args, emulated)})
    if emulated and not _is_rank0():
        return EXIT_OK  # under torchrun without GPUs: rank 0 emulates every rank
    code = EXIT_OK
    for i, result in enumerate(_results(args, [m], emulated, lambda _i, _m: emit)):
        # The report is written as soon as it comes (the other ranks wait for it); a second
        # result can only be an error once the run is over (tearing the process group down).
        code = max(code, _finish(m, result, args.out if i == 0 else None, emit))
    return code


def _tagged(m: Manifest) -> ProgressFn:
    """``emit`` with the manifest's name added to every event."""
    return lambda e: emit({**e, "manifest": m.name})


def _run_many(args: argparse.Namespace, manifests: list[Manifest], paths: list[str], names: list[str], emulated: bool) -> int:
    """Every manifest in turn, each report to ``--out-dir``; after a device error the rest are skipped."""
    if emulated and not _is_rank0():
        return EXIT_OK  # under torchrun without GPUs: rank 0 emulates every rank
    n = len(manifests)
    mode = _mode(args, emulated)

    def progress_for(i: int, m: Manifest) -> ProgressFn:
        emit({"event": "case", "index": i, "of": n, "manifest": m.name, "file": paths[i]})
        emit({"event": "start", "manifest": m.name, "world": m.world, "mode": mode})
        return _tagged(m)

    codes: list[int] = []
    reports = 0
    last: RunOutcome | RunnerError | None = None
    for i, last in enumerate(_results(args, manifests, emulated, progress_for)):
        if i >= n:  # an error once every run is over (tearing the process group down)
            codes.append(_finish(manifests[-1], last, None, emit))
            continue
        m = manifests[i]
        codes.append(_finish(m, last, Path(args.out_dir) / f"{names[i]}.json", _tagged(m)))
        reports += isinstance(last, RunOutcome)
    ran = len(codes)
    if ran < n and isinstance(last, RunnerError):
        # Only a device error (or an error before the first run) ends the sequence early.
        reason = f"{last.code} in {manifests[ran - 1].name} ended the run"
        if isinstance(last, DeviceError):
            reason += " (the GPU context may be unusable)"
        for j in range(ran, n):
            emit({"event": "skipped", "manifest": manifests[j].name, "file": paths[j], "reason": reason})
    code = max(codes, default=EXIT_OK)
    emit({"event": "summary", "of": n, "reports": reports, "exitCode": code})
    return code


def _results(
    args: argparse.Namespace, manifests: list[Manifest], emulated: bool, progress_for: Callable[[int, Manifest], ProgressFn]
) -> Iterator[RunOutcome | RunnerError]:
    """Per manifest in order, its outcome or the ``RunnerError`` that kept it from running.

    A ``DeviceError`` (an exception of the GPU stack) ends the sequence: the manifests after
    it are not run. An error before the first run (no process group...) comes as the first
    manifest's result and ends the sequence too.
    """
    try:
        if emulated:
            yield from _emulated(args, manifests, progress_for)
        elif args.ranks_on_one_gpu:
            from .._runner.onegpu import run_one_gpu_many

            yield from run_one_gpu_many(manifests, epochs=args.epochs, seed=args.seed, progress_for=progress_for)
        else:
            from .._runner.torchrun import run_gpu_many

            yield from run_gpu_many(
                manifests,
                epochs=args.epochs,
                seed=args.seed,
                baselines=args.baselines,
                symm_backend=args.symm_backend,
                progress_for=progress_for,
            )
    except RunnerError as exc:
        yield exc
    except Exception as exc:  # noqa: BLE001 - the GPU stack's own errors, reported as values
        yield DeviceError(f"{type(exc).__name__}: {exc}")


def _emulated(
    args: argparse.Namespace, manifests: list[Manifest], progress_for: Callable[[int, Manifest], ProgressFn]
) -> Iterator[RunOutcome | RunnerError]:
    """``_results`` on the CPU; an unexpected exception is reported like the GPU stack's."""
    from .._emulate.engine import emulate

    for i, m in enumerate(manifests):
        progress = progress_for(i, m)
        try:
            result: RunOutcome | RunnerError = emulate(
                m, epochs=args.epochs, seed=args.seed, timeout_s=args.timeout_s, on_progress=progress, engine=args.engine
            )
        except RunnerError as exc:
            result = exc
        except Exception as exc:  # noqa: BLE001 - reported as a value, as on the GPU
            yield DeviceError(f"{type(exc).__name__}: {exc}")
            return
        yield result


def _chain(args: argparse.Namespace) -> int:
    """``chain``: every stage of the chain emulated in order, checked end to end; one JSON line per event on stderr."""
    from .._emulate.chain import emulate_chain, load_chain

    if args.epochs < 1:
        return _usage("--epochs must be >= 1")
    try:
        outcome = emulate_chain(load_chain(args.chain), epochs=args.epochs, seed=args.seed, engine=args.engine, on_progress=emit)
    except RunnerError as exc:
        emit({"event": "failure", **exc.to_json()})
        return exc.exit_code
    for f in outcome.failures:
        emit({"event": "failure", **f.to_json()})
    return outcome.exit_code


def _kernels(args: argparse.Namespace) -> int:
    """``kernels``: the manifest of one key, compiled into ``--into`` unless already there; prints its path."""
    try:
        if args.any_rows:
            if args.m is not None:
                raise UsageError("--any-rows compiles for every row count: drop --m")
            key = rows_key(
                args.op,
                args.world,
                args.n,
                args.k,
                args.dtype,
                target=args.target,
                experts=args.experts or 0,
                topk=args.topk or 0,
                heads=args.heads,
                causal=args.causal,
            )
        elif args.m is None:
            raise UsageError(f"give --m (or --any-rows for {', '.join(ROWS_OPERATORS)})")
        else:
            # The key the torch API looks up for this call (ROWS_OPERATORS: the operator for every row count), unless --per-m.
            make = KernelKey if args.per_m else call_key
            key = make(
                args.op,
                args.world,
                args.m,
                args.n,
                args.k,
                args.dtype,
                experts=args.experts,
                topk=args.topk,
                heads=args.heads,
                causal=args.causal,
                target=args.target,
            )
        into = Path(args.into) if args.into else None
        if args.tlx:
            from .._kernels.tlx import prepare_tlx

            if args.any_rows or args.m is None:
                raise UsageError("--tlx compiles one row count: give --m (not --any-rows)")
            tlx = KernelKey(args.op, args.world, args.m, args.n, args.k, args.dtype, target=args.target, tlx=True)
            print(prepare_tlx(tlx, into if into is not None else cache_dir()))
            return EXIT_OK
        path = ensure_compiled(key, into)
        print(path)
        if args.candidates:
            from .._tune.candidates import prepare_candidates

            for c in prepare_candidates(key, args.candidates, into):
                print(f"{c.source:8s} {c.config.label:48s} {c.key.dirname}")
    except RunnerError as exc:
        return _usage(str(exc))
    return EXIT_OK


def _finish(m: Manifest, result: RunOutcome | RunnerError, out: str | Path | None, progress: ProgressFn) -> int:
    """Write the report of a run (rank 0) and its last progress lines; return its exit code.
    A run that did not happen (``RunnerError``) writes no report."""
    if isinstance(result, RunnerError):
        progress({"event": "error", **result.to_json()})
        return result.exit_code
    from .._report.report import build_report, write_report

    report = build_report(m, result)
    if _is_rank0():
        write_report(report, out)
    if result.failures:
        progress({"event": "error", **result.failures[0].to_json()})
    progress({"event": "done", "ok": result.ok, "exitCode": result.exit_code})
    return result.exit_code
