"""A vLLM-style fused-MoE Triton kernel: the single-GPU baseline a serving user has for MoE experts.

One kernel per expert GEMM of an MoE layer, the structure vLLM's and SGLang's ``fused_moe`` use: a
non-persistent grid over (block of ``BLOCK_M`` routing-table entries, n-block), grouped along M
(``GROUP_M``) for L2 reuse; each block's rows gathered through ``sorted_token_ids`` (row
``slot // A_DIV`` of A: a token's row when A holds tokens and slots are ``t·k + j``, the slot's own
row when A holds one row per slot); the expert's weights ``w[expert_of_block[block]]``; optionally
each row scaled by its routing weight; the rows stored at their slots. Blocks past the device's
``num_blocks`` exit at once. The routing tables are ``ovl_runtime.moe_align``'s (the same layout as
vLLM's ``moe_align_block_size``: slots grouped by expert, each group padded to ``BLOCK_M`` with the
sentinel ``T·k``).

The MoE runs' ``fused_moe`` baseline (their scripts: results/runs/moe-fused-baseline-h100-2026-11-27/provenance/),
taken at the fastest of ``CONFIGS`` per shape in the same run (vLLM ships tuned configurations per device and
expert shape; its untuned default is ``CONFIGS[0]``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl
from ovl_runtime.operators.ag_moe.routing_kernels import moe_align_block_size

#: BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages. The first is vLLM's default for bf16 when the
#: tokens outnumber the experts; the others the tile shapes its tuned H100/H200 tables hold at
#: thousands of tokens.
CONFIGS: list[tuple[int, int, int, int, int, int]] = [
    (64, 64, 32, 8, 4, 3),
    (64, 128, 64, 8, 4, 4),
    (64, 256, 64, 8, 4, 3),
    (128, 128, 64, 8, 4, 4),
    (128, 128, 64, 16, 8, 3),
    (128, 256, 64, 1, 8, 3),
    (128, 256, 64, 8, 8, 4),
]


@triton.jit
def fused_moe_kernel(
    a_ptr,
    w_ptr,
    c_ptr,
    weights_ptr,
    sorted_token_ids,
    expert_of_block,
    num_blocks_ptr,
    N,
    K,
    NUM_SLOTS,
    MAX_BLOCKS,
    A_DIV: tl.constexpr,
    MUL_WEIGHT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """``c[s] = (weights[s] ·) a[s // A_DIV] @ w[e]`` for the slots s of every valid block, e its expert."""
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(MAX_BLOCKS - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    if pid_m >= tl.load(num_blocks_ptr):
        return
    expert = tl.load(expert_of_block + pid_m).to(tl.int64)
    slots = tl.load(sorted_token_ids + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slots < NUM_SLOTS
    rows = tl.where(valid, slots // A_DIV, 0).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + offs_k[None, :]
    w_ptrs = w_ptr + expert * K * N + offs_k[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - ki * BLOCK_K
        a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < k_left), other=0.0)
        w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * N
    if MUL_WEIGHT:
        acc = acc * tl.load(weights_ptr + slots, mask=valid, other=0.0)[:, None]
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + slots[:, None].to(tl.int64) * N + cols[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & (cols[None, :] < N))


def config_name(cfg: tuple[int, int, int, int, int, int]) -> str:
    bm, bn, bk, gm, warps, stages = cfg
    return f"{bm}x{bn}x{bk} g{gm} w{warps} s{stages}"


def launcher(
    a: Any,
    w: Any,
    c: Any,
    tables: tuple[Any, Any, Any],
    cfg: tuple[int, int, int, int, int, int],
    *,
    a_div: int,
    weights: Any = None,
) -> Callable[[], None]:
    """A no-argument launch of the kernel on these tensors: ``a [rows, K]``, ``w [E, K, N]``,
    ``c [slots, N]``, ``tables`` from ``moe_align_block_size(ids, E, cfg[0])``, ``weights [slots]``
    (fp32, slot order) to scale each row by. Checks what the kernel cannot."""
    bm, bn, bk, gm, warps, stages = cfg
    sorted_ids, expert_of_block, num_blocks = tables
    if sorted_ids.numel() % bm:
        raise ValueError(f"the routing tables were built for another BLOCK_M than {bm}")
    if a.shape[1] != w.shape[1] or c.shape[1] != w.shape[2]:
        raise ValueError(f"shapes do not chain: a {tuple(a.shape)}, w {tuple(w.shape)}, c {tuple(c.shape)}")
    if not (a.is_contiguous() and w.is_contiguous() and c.is_contiguous()):
        raise ValueError("a, w and c must be contiguous")
    max_blocks = sorted_ids.numel() // bm
    grid = (max_blocks * triton.cdiv(w.shape[2], bn),)
    return functools.partial(
        fused_moe_kernel[grid],
        a, w, c, weights if weights is not None else c, sorted_ids, expert_of_block, num_blocks,
        w.shape[2], w.shape[1], c.shape[0], max_blocks,
        A_DIV=a_div, MUL_WEIGHT=weights is not None, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip


def cases(a: Any, w: Any, ids: Any, *, a_div: int, weights: Any = None, prefix: str = "fused_moe", configs: list | None = None) -> list:
    """``(name, fn, c)`` per configuration (default ``CONFIGS``): ``fn()`` writes ``c [T·k, N]`` in slot order,
    ``c[s] = (weights[s] ·) a[s // a_div] @ w[ids.flat[s]]`` (routing tables built once per ``BLOCK_M``,
    outside the timed launch, as the emitted kernels' are)."""
    slots = ids.numel()
    flat_w = None if weights is None else weights.reshape(-1).float().contiguous()
    tables: dict[int, tuple[Any, Any, Any]] = {}
    out = []
    for cfg in CONFIGS if configs is None else configs:
        if cfg[0] not in tables:
            tables[cfg[0]] = moe_align_block_size(ids, w.shape[0], cfg[0])
        c = torch.empty(slots, w.shape[2], device=a.device, dtype=a.dtype)
        out.append((f"{prefix} {config_name(cfg)}", launcher(a, w, c, tables[cfg[0]], cfg, a_div=a_div, weights=flat_w), c))
    return out
