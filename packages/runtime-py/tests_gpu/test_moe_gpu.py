"""MoE with routing computed on the device through the torch API on a GPU, every rank in one
process (``OneGpuGroup``): ``ops.moe_all_gather_grouped_matmul`` against torch for random and
skewed routings (an expert without tokens, every token on one expert, top-k 1 and 2), a fresh
routing per call with one compiled operator, CUDA-graph replays whose routing changes between
replays (the tables are rebuilt on the device), the routing kernels against their numpy
reference, bad input refused before any launch, and one operator for every token count (the default) that compiles
nothing — no ovl compile, no Triton JIT — for a new count after its warm-up.

Needs a CUDA device and the compiled kernels: the keys below on ``$OVL_KERNELS`` (made on a
machine with ovl's CLI by ``python tests_gpu/test_moe_gpu.py --prepare DIR``) or a compiler at
hand (``$OVL_CLI``). Skipped otherwise. Times here are not performance figures.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import counted_compiles, dtypes, prepare_main, rand, rel, unavailable  # noqa: E402

from ovl_runtime import ops as _ops  # noqa: E402, F401 - sets CUDA_DEVICE_MAX_CONNECTIONS before CUDA starts
from ovl_runtime._kernels import library as lib  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.operators.ag_moe.routing import draw_routing, moe_align_reference  # noqa: E402

#: (world, tokens per rank, N = intermediate per rank, K = hidden, experts, top-k)
SHAPES = [(2, 128, 256, 512, 8, 2), (4, 100, 128, 256, 4, 1), (8, 128, 256, 512, 8, 2)]


def all_keys() -> list[lib.KernelKey]:
    # Both operators: the one for every token count (the torch API's default) and the one of each count.
    own = [lib.KernelKey("ag-moe", w, w * m, n, k, d, experts=e, topk=t) for w, m, n, k, e, t in SHAPES for d in lib.COMMON_DTYPES]
    every = [lib.call_key("ag-moe", w, w * m, n, k, d, experts=e, topk=t) for w, m, n, k, e, t in SHAPES for d in lib.COMMON_DTYPES]
    return own + [key for key in every if key.rows]


pytestmark = pytest.mark.skipif(unavailable(all_keys()) is not None, reason=unavailable(all_keys()) or "")


def routing(world: int, tokens: int, topk: int, experts: int, choices=None, seed=0) -> torch.Tensor:
    ids = draw_routing(np.random.default_rng(seed), tokens, topk, experts, choices)
    return torch.from_numpy(ids).cuda().unsqueeze(0).expand(world, tokens, topk).contiguous()


def want_of(x: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Per rank, ``C[t·k + j] = x_all[t] @ w[rank][ids[t, j]]`` in float32."""
    world, m, hidden = x.shape
    full = x.reshape(world * m, hidden).float()
    flat = ids[0].reshape(-1).long()
    k = ids.shape[-1]
    out = torch.zeros(world, flat.numel(), w.shape[-1], device=x.device)
    for e in torch.unique(flat).tolist():
        slots = torch.nonzero(flat == e).squeeze(1)
        for r in range(world):
            out[r, slots] = full[slots // k] @ w[r][e].float()
    return out


@pytest.mark.parametrize("dtype", dtypes(), ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize(("world", "m", "n", "k", "experts", "topk"), SHAPES)
@pytest.mark.parametrize("choices", [None, "skip-one", "one"])
@pytest.mark.parametrize("any_rows", [True, False], ids=["any-rows", "per-m"])
def test_moe_matches_torch(world, m, n, k, experts, topk, choices, any_rows, dtype, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    # Both operators: the one for every token count (the plain gather then grouped GEMM below the compiler's crossover)
    # and the overlapped one compiled for this count.
    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)

    pool = None if choices is None else list(range(1, experts)) if choices == "skip-one" else list(range(topk))
    g = OneGpuGroup(world)
    w = rand(world, experts, k, n, seed=7, dtype=dtype) / 8
    for step in range(3):  # a fresh routing and tokens per call, one compiled operator
        x = rand(world, m, k, seed=step, dtype=dtype) / 8
        ids = routing(world, world * m, topk, experts, pool, seed=step)
        y = ops.moe_all_gather_grouped_matmul(x, ids, w, g)
        ops.synchronize(g)
        assert y.shape == (world, world * m * topk, n)
        assert rel(y, want_of(x, ids, w)) < 0.01, step
    assert len(ops.operators()) == 1


def test_a_captured_graph_rebuilds_the_routing_on_every_replay():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    world, m, n, k, experts, topk = SHAPES[2]
    g = OneGpuGroup(world)
    x, w = rand(world, m, k) / 8, rand(world, experts, k, n, seed=3) / 8
    ids = routing(world, world * m, topk, experts)
    ops.moe_all_gather_grouped_matmul(x, ids, w, g)  # the eager call compiles and loads the kernels
    ops.synchronize(g)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = ops.moe_all_gather_grouped_matmul(x, ids, w, g)
    for step in range(10):
        x.copy_(rand(world, m, k, seed=100 + step) / 8)
        skew = None if step % 2 else [step % experts, (step + 1) % experts]
        ids.copy_(routing(world, world * m, topk, experts, skew, seed=step))
        graph.replay()
        ops.synchronize(g)
        assert rel(y, want_of(x, ids, w)) < 0.01, step


@pytest.mark.parametrize("dtype", dtypes(), ids=lambda d: str(d).removeprefix("torch."))
def test_any_rows_moe_compiles_nothing_for_a_new_token_count(dtype):
    """One AllGather + MoE for every token count: after a warm-up at two counts, calls at counts that are not powers of
    two run the same compiled kernels (the body and the routing kernels) — 0 ovl compiles (the library's
    ``compile_key``) and 0 Triton JIT compiles (``triton.knobs.runtime.jit_cache_hook``) — each correct within bf16
    tolerance. The compiler's crossover (a performance call) is lifted so that every call runs the overlapped kernels;
    then, restored below a count, the plain path runs there and compiles nothing either."""
    import dataclasses

    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    world, _m, n, k, experts, topk = SHAPES[0]
    g = OneGpuGroup(world)
    w = rand(world, experts, k, n, seed=2, dtype=dtype) / 8

    def call(M: int, seed: int):
        x = rand(world, M // world, k, seed=seed, dtype=dtype) / 8
        ids = routing(world, M, topk, experts, seed=seed)
        return ops.moe_all_gather_grouped_matmul(x, ids, w, g), want_of(x, ids, w)

    call(world * 128, 0)  # the first call compiles and loads the operator for every token count
    op = next(o for o in ops.operators() if hasattr(o, "path"))
    assert op.m.reference.operator == "ag-moe" and op.m.rows is not None
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    for i, M in enumerate((world * 64, world * 300)):  # warm-up: the kernels' first launches
        call(M, 10 + i)
    ops.synchronize(g)
    with counted_compiles() as compiles:
        for i, M in enumerate((op.rows.min, 2 * 101, 2 * 517, 3006, 6002)):
            assert op.path(M) == "overlapped", M
            y, want = call(M, 20 + i)
            ops.synchronize(g)
            assert y.shape == want.shape == (world, M * topk, n) and y.dtype == dtype and rel(y, want) < 0.01, M
        op.rows = dataclasses.replace(op.rows, fallback_below=4096, fallback_reason="a test's crossover")
        y, want = call(2 * 777, 40)
        ops.synchronize(g)
        assert op.path(2 * 777).startswith("not overlapped below 4096") and rel(y, want) < 0.01
    assert compiles == {"ovl": 0, "triton": 0}
    assert len(ops.operators()) == 1


def test_the_routing_kernels_match_numpy_on_the_gpu():
    from ovl_runtime.operators.ag_moe.routing_kernels import moe_align_block_size

    for tokens, topk, experts, bm, choices in [(8192 * 2, 2, 8, 64, None), (8192, 5, 32, 128, None), (1000, 2, 32, 64, [3, 9])]:
        ids = draw_routing(np.random.default_rng(tokens), tokens, topk, experts, choices)
        s, e, nb = moe_align_block_size(torch.from_numpy(ids).cuda(), experts, bm)
        rs, re_, rn = moe_align_reference(ids, experts, bm)
        assert int(nb[0]) == rn and int(nb[1]) == 0
        np.testing.assert_array_equal(s.cpu().numpy(), rs)
        np.testing.assert_array_equal(e.cpu().numpy(), re_)


def test_bad_input_is_refused_before_any_launch():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    world, m, n, k, experts, topk = SHAPES[0]
    g = OneGpuGroup(world)
    x, w = rand(world, m, k), rand(world, experts, k, n)
    ids = routing(world, world * m, topk, experts)
    with pytest.raises(UsageError, match="int32"):
        ops.moe_all_gather_grouped_matmul(x, ids.long(), w, g)
    with pytest.raises(UsageError, match="every rank's tokens"):
        ops.moe_all_gather_grouped_matmul(x, ids[:, :m], w, g)
    with pytest.raises(UsageError, match="hidden sizes differ"):
        ops.moe_all_gather_grouped_matmul(x, ids, rand(world, experts, k // 2, n), g)
    with pytest.raises(UsageError, match="top-k \\(3\\) must be between 1 and the number of experts \\(2\\)"):
        ops.moe_all_gather_grouped_matmul(x, routing(world, world * m, 3, 4), rand(world, 2, k, n), g)
    bad = ids.clone()
    bad[:, 5, 1] = experts
    with pytest.raises(UsageError, match=f"is not an expert of \\[0, {experts}\\)"):
        ops.moe_all_gather_grouped_matmul(x, bad, w, g, validate=True)
    assert ops.operators() == []


if __name__ == "__main__":
    prepare_main("test_moe_gpu.py", all_keys)
