"""Compiled local bodies in the numpy engine: the operator's arithmetic (a GEMM) under the
kernel's own tile program, evaluated from the manifest's index maps exactly as the source
prints them — visit order, per-tile waits on every slot column, per-tile notifies.

This models what a body computes, not the body's code: the interpreter engine
(``_emulate/interpret.py``) executes the emitted source itself. Bodies whose operator is not a GEMM
(``template.params.operator``) are left to the interpreter. The grouped GEMM
(``ag-grouped-gemm``) reads B as [E, K, N] and each m-block's expert from the table the
kernel's ``groups`` parameter names, as the body does.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._manifest.index_maps import TileProgram
from .._signals.board import epoch_target
from ..errors import KernelFault, ManifestError
from ..operators.ag_attention.emulate import attention_consumer
from ..operators.ag_moe.emulate import moe_consumer, moe_producer
from .kernels import KernelContext

_GEMM_OPERATORS = ("ag-gemm", "gemm-rs", "gemm-ar", "ag-grouped-gemm", "a2a-gemm", "ag-gemm-silu")


def _program(ctx: KernelContext, role: str) -> TileProgram:
    tp = ctx.kernel.tile_program
    if not isinstance(tp, TileProgram) or tp.role != role:
        raise ManifestError(
            f"kernel {ctx.kernel.name}.tileProgram", f"a compiled {role} body needs its {role} tile program in the manifest"
        )
    if ctx.kernel.template_params.get("operator") not in _GEMM_OPERATORS:
        raise ManifestError(
            f"kernel {ctx.kernel.name}.template.params.operator", "the numpy engine models GEMM bodies only: use the interpret engine"
        )
    return tp


def _operands(ctx: KernelContext) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    p = ctx.kernel.template_params
    M, N, K = int(p["M"]), int(p["N"]), int(p["K"])
    names = {str(p[k]) for k in ("a", "b", "c")}
    by_buffer = {b.name: n for n, b in ctx.kernel.args if b.kind == "buffer" and b.name in names}
    missing = names - set(by_buffer)
    if missing:
        raise ManifestError(f"kernel {ctx.kernel.name}.args", f"no argument is bound to buffer(s) {', '.join(sorted(missing))}")
    a = ctx.matrix(by_buffer[str(p["a"])], M, K)
    if p.get("bLayout") == "nk":  # fp8's B, held as Bt [N, K] (K-major)
        b = ctx.matrix(by_buffer[str(p["b"])], N, K).T
    else:
        # A grouped GEMM's B is [E, K, N], read here as E*K rows of N; `_weights` picks the expert.
        # ag-gemm-silu's W is [K, 2N], gate columns then up columns.
        b = ctx.matrix(by_buffer[str(p["b"])], K * _experts(ctx), 2 * N if _silu_mul(ctx) else N)
    c = ctx.matrix(by_buffer[str(p["c"])], M, N)
    return a, b, c, int(p["BLOCK_M"]), int(p["BLOCK_N"])


def _scale(ctx: KernelContext) -> float:
    """The product of the per-tensor scales an fp8 body applies in its epilogue (``template.params.scaleA`` and
    ``scaleB`` name their buffers; read at launch, as the kernel reads them), 1 for a body without scales."""
    p = ctx.kernel.template_params
    if "scaleA" not in p:
        return 1.0
    names = (str(p["scaleA"]), str(p["scaleB"]))
    by_buffer = {b.name: n for n, b in ctx.kernel.args if b.kind == "buffer" and b.name in names}
    if len(by_buffer) != 2:
        raise ManifestError(f"kernel {ctx.kernel.name}.args", f"no argument is bound to the scale buffer(s) {', '.join(names)}")
    return float(ctx.matrix(by_buffer[names[0]], 1, 1)[0, 0]) * float(ctx.matrix(by_buffer[names[1]], 1, 1)[0, 0])


def _silu_mul(ctx: KernelContext) -> bool:
    """Whether the body is the gate/up GEMM with the SiLU-and-multiply epilogue."""
    return ctx.kernel.template_params.get("operator") == "ag-gemm-silu"


def silu_mul(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``silu(gate) * up`` (silu(g) = g / (1 + e^-g)), in the arrays' precision."""
    return gate / (1.0 + np.exp(-gate)) * up


def _experts(ctx: KernelContext) -> int:
    """E of a grouped GEMM (``template.params.experts``), 1 for a plain GEMM."""
    if ctx.kernel.template_params.get("operator") != "ag-grouped-gemm":
        return 1
    return ctx.param("experts")


def _weights(ctx: KernelContext, b: np.ndarray, num_pid_m: int) -> Callable[[int], np.ndarray]:
    """m-block → the [K, N] matrix it multiplies by: B itself, or B[group table[m]] for a
    grouped GEMM (an expert outside [0, E) is a KernelFault, as the body's load would be)."""
    E = _experts(ctx)
    if ctx.kernel.template_params.get("operator") != "ag-grouped-gemm":
        return lambda m: b
    name = str(ctx.kernel.template_params.get("groups", ""))
    arg = next((n for n, a in ctx.kernel.args if a.kind == "table" and a.name == name), None)
    if arg is None:
        raise ManifestError(f"kernel {ctx.kernel.name}.args", f"no argument is bound to the group table {name!r} (template.params.groups)")
    table = ctx.table(arg, num_pid_m)
    b3 = b.reshape(E, -1, b.shape[1])

    def of(m: int) -> np.ndarray:
        e = int(table[m])
        if not 0 <= e < E:
            raise KernelFault(f"rank {ctx.rank}: {ctx.where()} m-block {m} reads expert {e} of {E} from {name}")
        return b3[e]

    return of


def _env(var: str, value: int, rank: int) -> dict[str, int]:
    return {var: value, "ovl_rank": rank}


def local_consumer(ctx: KernelContext) -> None:
    """C = A @ B over the gathered A, m-block by m-block in the program's order, each waiting
    on every slot column of its rows first."""
    if ctx.kernel.template_params.get("operator") == "ag-moe":  # rows gathered through the routing's tables
        return moe_consumer(ctx)
    if ctx.kernel.template_params.get("operator") == "ag-attention":  # kv blocks read group by group
        return attention_consumer(ctx)
    tp = _program(ctx, "consumer")
    a, b, c, BM, BN = _operands(ctx)
    scale = _scale(ctx)
    M, N = c.shape
    tables = ctx.map_tables((tp.order, *tp.slots))
    weights = _weights(ctx, b, tp.num_pid_m)
    sig = ctx.board("ovl_sig_ptr")
    target = epoch_target(ctx.size("ovl_epoch_ptr"), 1, sig.bits)
    for v in range(tp.num_pid_m):
        m = tp.order(_env("ovl_m", v, ctx.rank), tables)
        if not 0 <= m < tp.num_pid_m:
            raise ManifestError(
                f"kernel {ctx.kernel.name}.tileProgram.order", f"visit {v} maps to m-block {m}, outside [0, {tp.num_pid_m})"
            )
        for col in tp.slots:
            slot = col(_env("ovl_m", m, ctx.rank), tables)
            if slot >= 0:
                ctx.wait(sig, slot, target)
        rows = slice(m * BM, min(M, (m + 1) * BM))
        bm = weights(m)
        for n in range(math.ceil(N / BN)):
            cols = slice(n * BN, min(N, (n + 1) * BN))
            if _silu_mul(ctx):
                ups = slice(N + cols.start, N + cols.stop)
                c[rows, cols] = silu_mul(a[rows, :] @ bm[:, cols], a[rows, :] @ bm[:, ups])
            else:
                c[rows, cols] = (a[rows, :] @ bm[:, cols]) * scale


def local_producer(ctx: KernelContext) -> None:
    """C = A @ B tile by tile in the program's order; each stored tile notifies its slot columns."""
    tp = ctx.kernel.tile_program
    if isinstance(tp, TileProgram) and tp.gather is not None:  # moe-rs: rows gathered through the routing's tables
        return moe_producer(ctx)
    tp = _program(ctx, "producer")
    a, b, c, BM, BN = _operands(ctx)
    M, N = c.shape
    tables = ctx.map_tables((tp.order, *tp.slots))
    sig = ctx.board("ovl_sig_ptr")
    tiles = tp.num_pid_m * tp.num_pid_n
    for t in range(tiles):
        t2 = tp.order(_env("ovl_t", t, ctx.rank), tables)
        if not 0 <= t2 < tiles:
            raise ManifestError(f"kernel {ctx.kernel.name}.tileProgram.order", f"tile {t} maps to {t2}, outside [0, {tiles})")
        m, n = divmod(t2, tp.num_pid_n)
        rows = slice(m * BM, min(M, (m + 1) * BM))
        cols = slice(n * BN, min(N, (n + 1) * BN))
        c[rows, cols] = a[rows, :] @ b[:, cols]
        for col in tp.slots:
            slot = col(_env("ovl_t", t2, ctx.rank), tables)
            if slot >= 0:
                ctx.notify(sig, slot)


LOCAL_TEMPLATES: dict[str, Callable[[KernelContext], None]] = {
    "local-consumer": local_consumer,
    "local-producer": local_producer,
}
