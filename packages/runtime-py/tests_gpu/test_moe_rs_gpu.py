"""MoE part 2 (GroupGEMM + Scatter + TopK-reduce + ReduceScatter) through the torch API on a GPU, every
rank in one process (``OneGpuGroup``): ``moe_ops.moe_grouped_matmul_reduce_scatter`` against torch for
worlds 2/4/8 and random and skewed routings (an expert without tokens, every token on one expert),
a fresh routing per call (the slab targets accumulate on the device), every slab's notifies equal to
its target, and bad input refused before any launch.

Needs a CUDA device only: the kernels are the runner's (``ovl_runtime.moe_rs``), nothing is compiled
ahead. ``pytest tests_gpu/test_moe_rs_gpu.py``. Times here are not performance figures.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import rand, rel  # noqa: E402

from ovl_runtime import moe_ops  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.moe import draw_routing  # noqa: E402
from ovl_runtime.moe_rs import moe_rs_reference_torch  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

#: (world, tokens T, I/W, H, experts, top-k)
SHAPES = [(2, 256, 128, 256, 8, 2), (4, 400, 64, 512, 4, 1), (8, 1024, 192, 384, 8, 2), (8, 512, 128, 256, 32, 5)]


def routing(world: int, tokens: int, topk: int, experts: int, choices=None, seed=0):
    ids = draw_routing(np.random.default_rng(seed), tokens, topk, experts, choices)
    ids = torch.from_numpy(ids).cuda().unsqueeze(0).expand(world, tokens, topk).contiguous()
    g = torch.Generator(device="cuda").manual_seed(seed)
    wts = torch.rand((tokens, topk), device="cuda", generator=g).unsqueeze(0).expand(world, tokens, topk).contiguous()
    return ids, wts


@pytest.mark.parametrize(("world", "T", "inter", "H", "experts", "topk"), SHAPES)
@pytest.mark.parametrize("choices", [None, "skip-one", "one"])
def test_moe_rs_matches_torch(world, T, inter, H, experts, topk, choices):
    from ovl_runtime.groups import OneGpuGroup

    pool = None if choices is None else list(range(1, experts)) if choices == "skip-one" else list(range(topk))
    g = OneGpuGroup(world)
    w = rand(world, experts, inter, H, seed=7) / 8
    for step in range(3):  # a fresh routing and activations per call
        h = rand(world, T * topk, inter, seed=step) / 8
        ids, wts = routing(world, T, topk, experts, pool, seed=step)
        y = moe_ops.moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g)
        moe_ops.synchronize()
        assert y.shape == (world, T // world, H)
        assert rel(y, moe_rs_reference_torch(h, w, ids[0], wts[0])) < 0.01, step
    state = next(s for (name, _), s in moe_ops._states.items() if name == g.name)
    per = state["sig"].shape[1] // world
    for r in range(world):  # every owned slab collected exactly its target's notifies
        mine = slice(r * per, (r + 1) * per)
        assert torch.equal(state["sig"][r, mine], state["expect"][r, mine])


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
