"""GEMM+AllReduce kernels executed in numpy: ``ar-reduce``, ``ar-reduce-broadcast`` (and its any-row-count form
``ar-reduce-broadcast-rows``), ``tile-push``, ``ar-tile-reduce``.

``ar-reduce`` is ``rs-reduce`` storing into the rank's rows of the full output and notifying
its m-block's slot per tile; ``ar-reduce-broadcast`` stores each tile into every rank's output
and then notifies every peer once, with its tile count; the tile kernels walk their rank's table in row order (one
program; on the GPU several stride over the rows), wait, move or reduce one tile (strided
rows) and notify, exactly as the emitted Triton kernels do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..._emulate.comm import _flat, _peer, _peers, _rows, _wait
from ..._emulate.kernels import KernelContext, reduce_slab, reduce_slab_rows
from ...errors import KernelFault, ManifestError


def ar_reduce(ctx: KernelContext) -> None:
    """out[rank's rows] = Σ_p partials[p] (its own partial in place) as ``rs-reduce``; after each
    stored tile of m-block ``mb``, release-add 1 to slot ``done_base + mb``."""
    rpr, done = ctx.size("rows_per_rank"), ctx.size("done_base")
    out = ctx.matrix("out_ptr", (ctx.rank + 1) * rpr, ctx.size("N"))[ctx.rank * rpr :]
    sig = ctx.board("sig_ptr")
    reduce_slab(ctx, out, lambda mb, _rows, _cols: ctx.notify(sig, done + mb))


def ar_reduce_broadcast(ctx: KernelContext) -> None:
    """``ar-reduce`` storing each summed tile at this rank's rows of every rank's output (``out_ptrs``);
    after the last tile, release-adding the number of tiles stored to slot ``recv_base + rank`` of every
    peer (one program: on the GPU each program adds its own count)."""
    rpr, n, world = ctx.size("rows_per_rank"), ctx.size("N"), ctx.param("WORLD")
    outs, sigs = _peers(ctx, "out_ptrs"), _peers(ctx, "sig_ptrs")
    if len(outs) != world or len(sigs) != world:
        raise ManifestError(f"kernel {ctx.kernel.name}", f"WORLD is {world}, but the peer tables name {len(outs)} ranks")
    slabs = []
    for p, o in enumerate(outs):
        if o.size < world * rpr * n:
            raise KernelFault(
                f"rank {ctx.rank}: {ctx.where()} out_ptrs of rank {p} holds {o.size} elements, not {world} slabs of {rpr}x{n}"
            )
        slabs.append(o.reshape(-1)[ctx.rank * rpr * n : (ctx.rank + 1) * rpr * n].reshape(rpr, n))
    own = slabs[ctx.rank]
    slot = ctx.size("recv_base") + ctx.rank

    stored = 0

    def broadcast(_mb: int, rows: np.ndarray, cols: slice) -> None:
        nonlocal stored
        for p in range(world):
            if p != ctx.rank:
                slabs[p][rows, cols] = own[rows, cols]
        stored += 1

    reduce_slab(ctx, own, broadcast)
    for p in range(world):
        if p != ctx.rank:
            ctx.notify(sigs[p], slot, stored)


def ar_reduce_broadcast_rows(ctx: KernelContext) -> None:
    """``ar-reduce-broadcast`` over a slab of m = M / WORLD rows (M the ``ovl_rows`` argument,
    :func:`reduce_slab_rows`): each summed tile stored at this rank's rows of every rank's output, then the tiles
    stored release-added to slot ``recv_base + rank`` of every peer."""
    n, world, M = ctx.size("N"), ctx.param("WORLD"), ctx.size("ovl_rows")
    outs, sigs = _peers(ctx, "out_ptrs"), _peers(ctx, "sig_ptrs")
    if len(outs) != world or len(sigs) != world:
        raise ManifestError(f"kernel {ctx.kernel.name}", f"WORLD is {world}, but the peer tables name {len(outs)} ranks")
    m = M // world
    slabs = []
    for p, o in enumerate(outs):
        if o.size < M * n:
            raise KernelFault(f"rank {ctx.rank}: {ctx.where()} out_ptrs of rank {p} holds {o.size} elements, not {M}x{n}")
        slabs.append(o.reshape(-1)[ctx.rank * m * n : (ctx.rank + 1) * m * n].reshape(m, n))
    own = slabs[ctx.rank]
    stored = 0

    def broadcast(rows: np.ndarray, cols: slice) -> None:
        nonlocal stored
        for p in range(world):
            if p != ctx.rank:
                slabs[p][rows, cols] = own[rows, cols]
        stored += 1

    reduce_slab_rows(ctx, lambda _m: own, broadcast)
    for p in range(world):
        if p != ctx.rank:
            ctx.notify(sigs[p], ctx.size("recv_base") + ctx.rank, stored)


def _tile(ctx: KernelContext, flat: np.ndarray, offset: int, rows: int, cols: int, stride: int, what: str) -> np.ndarray:
    """The ``rows × cols`` view at ``offset`` of a row-major buffer with row stride ``stride``."""
    if rows == 0 or cols == 0:
        return flat[0:0].reshape(0, 0)
    if cols > stride or offset < 0 or offset + (rows - 1) * stride + cols > flat.size:
        raise KernelFault(
            f"rank {ctx.rank}: {ctx.where()} {what}: a {rows}x{cols} tile at element {offset} (row stride {stride}) "
            f"falls outside its {flat.size} elements"
        )
    return np.lib.stride_tricks.as_strided(flat[offset:], shape=(rows, cols), strides=(stride * flat.itemsize, flat.itemsize))


def tile_push(ctx: KernelContext) -> None:
    """Copy a finished local tile into its owner's symmetric buffer, then release-add the owner's slot."""
    src, dsts = _flat(ctx, "src_ptr"), [a.reshape(-1) for a in _peers(ctx, "dst_ptrs")]
    sig, sigs = ctx.board("sig_ptr"), _peers(ctx, "sig_ptrs")
    stride = ctx.size("row_stride")
    for row in _rows(ctx):
        _wait(ctx, sig, row)
        rows, cols = row["rows"], row["cols"]
        if rows and cols:
            dst = _peer(ctx, dsts, row["dst_rank"], "dst_rank")
            _tile(ctx, dst, row["dst_offset"], rows, cols, stride, "dst")[...] = _tile(
                ctx, src, row["src_offset"], rows, cols, stride, "src"
            )
        if row["notify_at"] >= 0:
            ctx.notify(_peer(ctx, sigs, row["dst_rank"], "dst_rank"), row["notify_at"])


def ar_tile_reduce(ctx: KernelContext) -> None:
    """Sum a tile's partials (this rank's own, every peer's pushed one), store the sum into every
    rank's output and release-add the tile's slot and the done count on every rank."""
    own = _flat(ctx, "own_ptr")
    part = _flat(ctx, "part_ptr")
    outs = [a.reshape(-1) for a in _peers(ctx, "out_ptrs")]
    sig, sigs = ctx.board("sig_ptr"), _peers(ctx, "sig_ptrs")
    world, stride = ctx.param("WORLD"), ctx.size("row_stride")
    slab, done = ctx.size("slab_elems"), ctx.size("done_at")
    if len(outs) != world or len(sigs) != world:
        raise ManifestError(f"kernel {ctx.kernel.name}", f"WORLD is {world}, but the peer tables name {len(outs)} ranks")
    for row in _rows(ctx):
        _wait(ctx, sig, row)
        rows, cols = row["rows"], row["cols"]
        if rows and cols:
            acc = _tile(ctx, own, row["own_offset"], rows, cols, stride, "own").astype(np.float32)
            for p in range(world):
                if p != ctx.rank:
                    acc = acc + _tile(ctx, part, p * slab + row["part_offset"], rows, cols, stride, f"partials of rank {p}")
            for p in range(world):
                _tile(ctx, outs[p], row["out_offset"], rows, cols, stride, f"output of rank {p}")[...] = acc
        if row["notify_at"] >= 0:
            for p in range(world):
                ctx.notify(sigs[p], row["notify_at"])
                ctx.notify(sigs[p], done)


AR_TEMPLATES: dict[str, Callable[[KernelContext], None]] = {
    "ar-reduce": ar_reduce,
    "ar-reduce-broadcast": ar_reduce_broadcast,
    "ar-reduce-broadcast-rows": ar_reduce_broadcast_rows,
    "tile-push": tile_push,
    "ar-tile-reduce": ar_tile_reduce,
}
