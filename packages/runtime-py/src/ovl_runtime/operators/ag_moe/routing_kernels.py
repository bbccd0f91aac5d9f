"""MoE routing tables computed on the device (TileLink §4.1's dynamic maps; vLLM's ``moe_align_block_size``).

From ``topk_ids [T, k]`` (int32, every rank's tokens: ``topk_ids[t, j]`` is the j-th expert of
token t) two Triton kernels write, with no host sync:

- ``sorted_token_ids [max_blocks × BLOCK_M]``: the token slots ``t·k + j`` grouped by expert
  (experts in order, slots ascending, so a block's tokens are ascending), each expert's group
  padded to a multiple of ``BLOCK_M`` with the sentinel ``T·k``; every entry past the last
  group is the sentinel too;
- ``expert_of_block [max_blocks]``: the expert of each block of ``BLOCK_M`` entries, ``-1``
  past the last valid block;
- ``num_blocks [2]``: the number of valid blocks, and the number of ids outside
  ``[0, E)`` (such slots are dropped: no block holds them).

``moe_align_count`` (one program per slice of the slots) writes each slice's per-expert
counts to a scratch ``counts [P, E_P2]``; ``moe_align_scatter`` (the same grid) reads them
all, places its slice's slots and writes its share of the blocks' experts and padding. Both
are ordinary kernels: the manifest launches them on every rank before the grouped GEMM
(template kinds ``moe-align-count`` / ``moe-align-scatter``), and ``moe_align_block_size``
launches them on a caller's tensors. ``operators.ag_moe.routing.moe_align_reference`` is the same in numpy.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from .routing import AlignSizes, check_sizes

#: Slots each program handles per step; experts are padded to a power of two.
CHUNK = 256
#: Programs of the two kernels (each handles ``ceil(T·k / P)`` slots and ``ceil(max_blocks / P)`` blocks).
DEFAULT_PROGRAMS = 32


@triton.jit
def moe_align_count(topk_ids_ptr, counts_ptr, NUMEL, PER, NUM_EXPERTS: tl.constexpr, E_P2: tl.constexpr, CHUNK_SIZE: tl.constexpr):
    """Program p: the per-expert counts of slots ``[p·PER, (p+1)·PER)`` into ``counts[p]``."""
    pid = tl.program_id(0)
    per = PER
    experts = tl.arange(0, E_P2)
    counts = tl.zeros((E_P2,), dtype=tl.int32)
    for start in range(0, per, CHUNK_SIZE):
        offs = pid * per + start + tl.arange(0, CHUNK_SIZE)
        inside = (offs < NUMEL) & (offs < (pid + 1) * per)
        ids = tl.load(topk_ids_ptr + offs, mask=inside, other=-1)
        hit = (ids[:, None] == experts[None, :]) & (experts[None, :] < NUM_EXPERTS)
        counts += tl.sum(hit.to(tl.int32), axis=0)
    tl.store(counts_ptr + pid * E_P2 + experts, counts)


@triton.jit
def moe_align_scatter(
    topk_ids_ptr,
    counts_ptr,
    sorted_ids_ptr,
    expert_of_block_ptr,
    num_blocks_ptr,
    NUMEL,
    PER,
    MAX_BLOCKS,
    PER_B,
    PROGRAMS,
    NUM_EXPERTS: tl.constexpr,
    E_P2: tl.constexpr,
    P_P2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    CHUNK_SIZE: tl.constexpr,
    BLOCKS_STEP: tl.constexpr,
):
    """Program p places its slots (after the slots of programs before it, per expert) and
    writes the experts and padding of its share of the blocks."""
    pid = tl.program_id(0)
    programs = PROGRAMS
    per = PER
    experts = tl.arange(0, E_P2)
    rows = tl.arange(0, P_P2)
    all_counts = tl.load(counts_ptr + rows[:, None] * E_P2 + experts[None, :], mask=rows[:, None] < programs, other=0)
    counts = tl.sum(all_counts, axis=0)
    before = tl.sum(tl.where(rows[:, None] < pid, all_counts, 0), axis=0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    starts = ends - padded
    num_blocks = tl.sum(padded, axis=0) // BLOCK_M
    if pid == 0:
        tl.store(num_blocks_ptr, num_blocks)
        tl.store(num_blocks_ptr + 1, NUMEL - tl.sum(counts, axis=0))
    # This program's slots, stable: a slot's place is its expert's start, the slots of that
    # expert in earlier programs, and those before it in this program.
    running = starts + before
    for start in range(0, per, CHUNK_SIZE):
        offs = pid * per + start + tl.arange(0, CHUNK_SIZE)
        inside = (offs < NUMEL) & (offs < (pid + 1) * per)
        ids = tl.load(topk_ids_ptr + offs, mask=inside, other=-1)
        hit = ((ids[:, None] == experts[None, :]) & (experts[None, :] < NUM_EXPERTS)).to(tl.int32)
        rank_in = tl.cumsum(hit, axis=0) - hit
        pos = tl.sum(hit * (rank_in + running[None, :]), axis=1)
        tl.store(sorted_ids_ptr + pos, offs, mask=inside & (tl.sum(hit, axis=1) > 0))
        running += tl.sum(hit, axis=0)
    # This program's blocks: the expert (-1 past the last valid block) and the sentinel in
    # every entry past its expert's slots (positions no slot above is placed at).
    block_ends = ends // BLOCK_M
    valid_end = starts + counts
    per_b = PER_B
    for b0 in range(0, per_b, BLOCKS_STEP):
        blocks = pid * per_b + b0 + tl.arange(0, BLOCKS_STEP)
        mine = (blocks < MAX_BLOCKS) & (blocks < (pid + 1) * per_b)
        e = tl.sum((block_ends[None, :] <= blocks[:, None]).to(tl.int32), axis=1)
        e = tl.where(blocks < num_blocks, e, -1)
        tl.store(expert_of_block_ptr + blocks, e, mask=mine)
        end = tl.sum(tl.where(experts[None, :] == e[:, None], valid_end[None, :], 0), axis=1)
        pos = blocks[:, None] * BLOCK_M + tl.arange(0, BLOCK_M)[None, :]
        tl.store(sorted_ids_ptr + pos, NUMEL + pos * 0, mask=mine[:, None] & (pos >= end[:, None]))


#: The two kernels again, never specialised on their sizes: an operator serving any row count (``ovl emit ag-moe
#: --any-rows``, whose emitted routing module imports these) passes new ones at every token count, which must not
#: compile a new variant (Triton specialises an int argument that is 1 or a multiple of 16).
moe_align_count_rows = triton.jit(moe_align_count.fn, do_not_specialize=["NUMEL", "PER"], do_not_specialize_on_alignment=["NUMEL", "PER"])
_SIZES = ["NUMEL", "PER", "MAX_BLOCKS", "PER_B"]
moe_align_scatter_rows = triton.jit(moe_align_scatter.fn, do_not_specialize=_SIZES, do_not_specialize_on_alignment=_SIZES)


def moe_align_block_size(
    topk_ids: Any,
    num_experts: int,
    block_m: int,
    *,
    programs: int = DEFAULT_PROGRAMS,
    out: tuple[Any, Any, Any, Any] | None = None,
) -> tuple[Any, Any, Any]:
    """``(sorted_token_ids, expert_of_block, num_blocks)`` of ``topk_ids`` (a ``[T, k]`` int32
    torch tensor), computed on its device by the two kernels, without a host sync.

    ``out``: ``(counts, sorted_token_ids, expert_of_block, num_blocks)`` to write into (sizes as
    ``alloc_tables`` makes them). ``num_blocks[1]`` counts ids outside ``[0, num_experts)``.
    @raises ValueError for a topk_ids that is not a 2-D int32 tensor or sizes that do not fit.
    """
    import torch

    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dim() != 2 or topk_ids.dtype != torch.int32:
        raise ValueError(f"moe_align_block_size: topk_ids must be a [tokens, top-k] int32 tensor, got {_describe(topk_ids)}")
    sizes = check_sizes(int(topk_ids.shape[0]), int(topk_ids.shape[1]), num_experts, block_m)
    tables = out if out is not None else alloc_tables(sizes, programs, topk_ids.device)
    counts, sorted_ids, expert_of_block, num_blocks = tables
    ids = topk_ids.contiguous()
    if ids.device.type == "cpu":  # Triton's interpreter (TRITON_INTERPRET=1), made safe for ovl's threads
        from ..._emulate.interpret_patch import patched

        with patched():
            launch_align(sizes, programs, ids, counts, sorted_ids, expert_of_block, num_blocks)
    else:
        launch_align(sizes, programs, ids, counts, sorted_ids, expert_of_block, num_blocks)
    return sorted_ids, expert_of_block, num_blocks


def alloc_tables(sizes: AlignSizes, programs: int, device: Any) -> tuple[Any, Any, Any, Any]:
    """Empty ``(counts, sorted_token_ids, expert_of_block, num_blocks)`` for ``sizes`` on ``device``."""
    import torch

    i32 = {"dtype": torch.int32, "device": device}
    return (
        torch.empty((programs, sizes.experts_p2), **i32),
        torch.empty((sizes.padded,), **i32),
        torch.empty((sizes.max_blocks,), **i32),
        torch.empty((2,), **i32),
    )


def launch_align(
    sizes: AlignSizes, programs: int, topk_ids: Any, counts: Any, sorted_ids: Any, expert_of_block: Any, num_blocks: Any
) -> None:
    """The two launches, on the current stream."""
    moe_align_count[(programs,)](
        topk_ids,
        counts,
        sizes.slots,
        per_program(sizes.slots, programs),
        NUM_EXPERTS=sizes.experts,
        E_P2=sizes.experts_p2,
        CHUNK_SIZE=CHUNK,
    )
    moe_align_scatter[(programs,)](
        topk_ids,
        counts,
        sorted_ids,
        expert_of_block,
        num_blocks,
        sizes.slots,
        per_program(sizes.slots, programs),
        sizes.max_blocks,
        per_program(sizes.max_blocks, programs),
        programs,
        NUM_EXPERTS=sizes.experts,
        E_P2=sizes.experts_p2,
        P_P2=max(2, triton.next_power_of_2(programs)),
        BLOCK_M=sizes.block_m,
        CHUNK_SIZE=CHUNK,
        BLOCKS_STEP=blocks_step(sizes.block_m),
    )


def per_program(n: int, programs: int) -> int:
    """Slots (or blocks) each of ``programs`` programs handles."""
    return -(-n // programs)


def blocks_step(block_m: int) -> int:
    """Blocks the scatter kernel pads per step (about ``CHUNK`` entries; a power of two)."""
    return max(1, CHUNK // block_m)


__all__ = [
    "AlignSizes",
    "alloc_tables",
    "check_sizes",
    "launch_align",
    "moe_align_block_size",
    "moe_align_count",
    "moe_align_count_rows",
    "moe_align_scatter",
    "moe_align_scatter_rows",
]


def _describe(x: Any) -> str:
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    return f"{type(x).__name__} shape={tuple(shape) if shape is not None else None} dtype={dtype}"
