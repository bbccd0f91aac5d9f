"""MoE part 2 (GroupGEMM + Scatter + TopK-reduce + ReduceScatter) through the torch API on a GPU, every
rank in one process (``OneGpuGroup``): ``moe_ops.moe_grouped_matmul_reduce_scatter`` against torch for
worlds 2/4/8 and random and skewed routings (an expert without tokens, every token on one expert),
a fresh routing per call (the slab targets accumulate on the device), every slab's notifies equal to
its target, bad input refused before any launch, and one operator for every token count (the default) that compiles
nothing — no ovl compile, no Triton JIT — for a new count after its warm-up.

The kernels are the compiled ``moe-rs`` manifests (``ovl emit moe-rs``): found on ``$OVL_KERNELS`` (made
on a machine with ovl's CLI by ``python tests_gpu/test_moe_rs_gpu.py --prepare DIR``) or compiled by a
compiler at hand (``$OVL_CLI``). Skipped otherwise. Times here are not performance figures.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import counted_compiles, dtypes, prepare_main, rand, rel, unavailable  # noqa: E402

from ovl_runtime._kernels import library as lib  # noqa: E402
from ovl_runtime._torch_api.tensors import DTYPES  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.operators.ag_moe.routing import draw_routing  # noqa: E402
from ovl_runtime.operators.moe_rs import api as moe_ops  # noqa: E402
from ovl_runtime.operators.moe_rs.kernels import moe_rs_reference_torch  # noqa: E402

#: (world, tokens T, I/W, H, experts, top-k)
SHAPES = [(2, 256, 128, 256, 8, 2), (4, 400, 64, 512, 4, 1), (8, 1024, 192, 384, 8, 2), (8, 512, 128, 256, 32, 5)]


def all_keys() -> list[lib.KernelKey]:
    # Both operators: the one for every token count (the torch API's default) and the one of each count.
    own = [lib.KernelKey("moe-rs", w, t, h, i, d, experts=e, topk=k) for w, t, i, h, e, k in SHAPES for d in lib.COMMON_DTYPES]
    every = [lib.rows_key("moe-rs", w, h, i, d, experts=e, topk=k) for w, t, i, h, e, k in SHAPES for d in lib.COMMON_DTYPES]
    return own + every


pytestmark = pytest.mark.skipif(unavailable(all_keys()) is not None, reason=unavailable(all_keys()) or "")


def routing(world: int, tokens: int, topk: int, experts: int, choices=None, seed=0):
    ids = draw_routing(np.random.default_rng(seed), tokens, topk, experts, choices)
    ids = torch.from_numpy(ids).cuda().unsqueeze(0).expand(world, tokens, topk).contiguous()
    g = torch.Generator(device="cuda").manual_seed(seed)
    wts = torch.rand((tokens, topk), device="cuda", generator=g).unsqueeze(0).expand(world, tokens, topk).contiguous()
    return ids, wts


@pytest.mark.parametrize("dtype", dtypes(), ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize(("world", "T", "inter", "H", "experts", "topk"), SHAPES)
@pytest.mark.parametrize("choices", [None, "skip-one", "one"])
@pytest.mark.parametrize("any_rows", [True, False], ids=["any-rows", "per-m"])
def test_moe_rs_matches_torch(world, T, inter, H, experts, topk, choices, any_rows, dtype, monkeypatch):
    import dataclasses

    from ovl_runtime._runner.rows import RowsOperator
    from ovl_runtime._torch_api.registry import _operators
    from ovl_runtime.groups import OneGpuGroup

    # Both operators: the one for every token count (its crossover lifted after the first call, which may run the
    # plain grouped GEMM then reduce-scatter, so that the later ones overlap) and the one compiled for this count.
    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)
    pool = None if choices is None else list(range(1, experts)) if choices == "skip-one" else list(range(topk))
    g = OneGpuGroup(world)
    w = rand(world, experts, inter, H, seed=7, dtype=dtype) / 8
    key = lib.call_key("moe-rs", world, T, H, inter, DTYPES[dtype], experts=experts, topk=topk)
    assert bool(key.rows) == any_rows
    for step in range(3):  # a fresh routing and activations per call
        h = rand(world, T * topk, inter, seed=step, dtype=dtype) / 8
        ids, wts = routing(world, T, topk, experts, pool, seed=step)
        y = moe_ops.moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g)
        moe_ops.synchronize()
        assert y.shape == (world, T // world, H)
        assert rel(y, moe_rs_reference_torch(h, w, ids[0], wts[0])) < 0.01, step
        top = _operators[(key.dirname, g.name)]
        if isinstance(top, RowsOperator) and step == 0:
            top.rows = dataclasses.replace(top.rows, fallback_below=None, fallback_reason=None)
    op = top.bound[T] if isinstance(top, RowsOperator) else top
    for s in op.ranks:  # every owned slab collected exactly its target's notifies (32-bit words, wrapping)
        expect = s.tensors["moe_slab_expect"].long() & 0xFFFFFFFF
        sig = s.tensors[op.m.signals.buffer].long() & 0xFFFFFFFF
        per = expect.numel() // world
        mine = slice(s.rank * per, (s.rank + 1) * per)
        assert torch.equal(sig[mine], expect[mine]), s.rank
        assert int(expect[mine].min()) > 0


@pytest.mark.parametrize("dtype", dtypes(), ids=lambda d: str(d).removeprefix("torch."))
def test_any_rows_moe_rs_compiles_nothing_for_a_new_token_count(dtype):
    """One MoE + ReduceScatter for every token count: after a warm-up at two counts, calls at counts that are not
    powers of two (from one token a rank) run the same compiled kernels (the routing, the permute, slab-expect, body,
    TopK-sum, notify and reducer) — 0 ovl compiles (the library's ``compile_key``) and 0 Triton JIT compiles
    (``triton.knobs.runtime.jit_cache_hook``) — each correct within bf16 tolerance. The compiler's crossover (a
    performance call) is lifted so that every call runs the overlapped kernels; then, restored below a count, the
    plain path runs there and compiles nothing either."""
    import dataclasses

    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    world, _T, inter, H, experts, topk = SHAPES[0]
    g = OneGpuGroup(world)
    w = rand(world, experts, inter, H, seed=2, dtype=dtype) / 8

    def call(T: int, seed: int):
        h = rand(world, T * topk, inter, seed=seed, dtype=dtype) / 8
        ids, wts = routing(world, T, topk, experts, seed=seed)
        return moe_ops.moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g), moe_rs_reference_torch(h, w, ids[0], wts[0])

    call(world * 128, 0)  # the first call compiles and loads the operator for every token count
    op = next(o for o in ops.operators() if hasattr(o, "path"))
    assert op.m.reference.operator == "moe-rs" and op.m.rows is not None and op.m.rows.multiple == world
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    for i, T in enumerate((world * 64, world * 300)):  # warm-up: the kernels' first launches
        call(T, 10 + i)
    moe_ops.synchronize()
    with counted_compiles() as compiles:
        for i, T in enumerate((op.rows.min, 2 * 101, 2 * 517, 3006, 6002)):
            assert op.path(T) == "overlapped", T
            y, want = call(T, 20 + i)
            moe_ops.synchronize()
            assert y.shape == want.shape == (world, T // world, H) and y.dtype == dtype and rel(y, want) < 0.01, T
        op.rows = dataclasses.replace(op.rows, fallback_below=4096, fallback_reason="a test's crossover")
        y, want = call(2 * 777, 40)
        moe_ops.synchronize()
        assert op.path(2 * 777).startswith("not overlapped below 4096") and rel(y, want) < 0.01
    assert compiles == {"ovl": 0, "triton": 0}
    assert len(ops.operators()) == 1


def test_bad_input_is_refused_before_any_launch():
    from ovl_runtime.groups import OneGpuGroup

    world, T, inter, H, experts, topk = SHAPES[0]
    g = OneGpuGroup(world)
    h, w = rand(world, T * topk, inter), rand(world, experts, inter, H)
    ids, wts = routing(world, T, topk, experts)
    with pytest.raises(UsageError, match="int32"):
        moe_ops.moe_grouped_matmul_reduce_scatter(h, ids.long(), wts, w, g)
    with pytest.raises(UsageError, match="intermediate sizes differ"):
        moe_ops.moe_grouped_matmul_reduce_scatter(h, ids, wts, rand(world, experts, inter // 2, H), g)
    with pytest.raises(UsageError, match="top-k \\(3\\) exceeds"):
        ids3, wts3 = routing(world, T, 3, 4)
        moe_ops.moe_grouped_matmul_reduce_scatter(rand(world, T * 3, inter), ids3, wts3, rand(world, 2, inter, H), g)
    with pytest.raises(UsageError, match="divide evenly over the world"):
        idsx, wtsx = routing(world, T - 1, topk, experts)
        moe_ops.moe_grouped_matmul_reduce_scatter(rand(world, (T - 1) * topk, inter), idsx, wtsx, w, g)
    with pytest.raises(UsageError, match="T·k"):
        moe_ops.moe_grouped_matmul_reduce_scatter(rand(world, T * topk - 2, inter), ids, wts, w, g)


if __name__ == "__main__":
    prepare_main("test_moe_rs_gpu.py", all_keys)
