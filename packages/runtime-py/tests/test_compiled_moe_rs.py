"""moe-rs (GroupGEMM + Scatter + TopK-reduce + ReduceScatter, routing on the device): the slab
notify counts against their numpy reference, the kernels under Triton's interpreter against the
numpy and torch references with fresh random inputs and uneven routing (an expert with no tokens,
every token on one expert), and bad sizes refused before any launch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ovl_runtime.interpret import interpret_unavailable
from ovl_runtime.moe import draw_routing, moe_align_reference
from ovl_runtime.moe_rs import check_moe_rs, moe_rs_one_device, moe_rs_reference, moe_rs_reference_torch, slab_cover_reference

pytestmark = pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))

CASES = [
    # world, T, k, E, I, H, slab_t, choices
    (2, 32, 2, 4, 24, 40, 8, None),
    (2, 32, 1, 4, 16, 32, 16, [2]),  # every token on one expert
    (4, 48, 2, 5, 16, 24, 4, [0, 1, 3]),  # experts 2 and 4 without tokens
    (1, 16, 3, 3, 8, 16, None, None),
]


def _inputs(rng, world, T, k, E, inter, H, choices):
    ids = draw_routing(rng, T, k, E, choices)
    wts = rng.random((T, k)).astype(np.float32)
    h = [rng.standard_normal((T * k, inter)).astype(np.float32) for _ in range(world)]
    w2 = [(rng.standard_normal((E, inter, H)) / np.sqrt(inter)).astype(np.float32) for _ in range(world)]
    return ids, wts, h, w2


@pytest.mark.parametrize(("world", "T", "k", "E", "inter", "H", "slab_t", "choices"), CASES)
def test_moe_rs_matches_the_references_over_launches(world, T, k, E, inter, H, slab_t, choices):
    rng = np.random.default_rng()
    state: dict = {}
    for _ in range(2):  # the signal slots and targets carry over: a second launch waits for its own notifies
        ids, wts, h, w2 = _inputs(rng, world, T, k, E, inter, H, choices)
        got = moe_rs_one_device(
            torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts),
            slab_t=slab_t, block_m=16, block_n=16, block_k=16, block_t=8, num_sms=3, state=state,
        )  # fmt: skip
        want = moe_rs_reference(h, w2, ids, wts)
        tref = moe_rs_reference_torch(
            torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts)
        )
        for r in range(world):
            np.testing.assert_allclose(got[r].numpy(), want[r], rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(tref[r].numpy(), want[r], rtol=1e-4, atol=1e-4)
    # every slab collected, on its owner, exactly the notifies its target counted (and no rank else got any)
    per = state["sig"].shape[1] // world
    for r in range(world):
        mine = slice(r * per, (r + 1) * per)
        np.testing.assert_array_equal(state["sig"][r, mine].numpy(), state["expect"][r, mine].numpy())
        assert int(state["sig"][r].sum()) == int(state["sig"][r, mine].sum())
        assert int(state["expect"][r, mine].min()) > 0


def test_slab_targets_count_the_blocks_that_cover_each_slab():
    rng = np.random.default_rng()
    world, T, k, E, inter, H, slab_t = 2, 64, 2, 6, 8, 16, 8
    ids, wts, h, w2 = _inputs(rng, world, T, k, E, inter, H, [0, 4, 5])
    state: dict = {}
    moe_rs_one_device(
        torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts),
        slab_t=slab_t, block_m=16, block_n=16, block_k=16, block_t=8, state=state,
    )  # fmt: skip
    sorted_ids, _, blocks = moe_align_reference(ids, E, 16)
    cover = slab_cover_reference(sorted_ids, blocks, 16, k, slab_t, T // slab_t)
    assert cover.min() >= 1
    for r in range(world):
        np.testing.assert_array_equal(state["expect"][r].numpy(), cover * world * 1)  # H = 16: one n-tile


def test_bad_sizes_are_refused_before_any_launch():
    with pytest.raises(ValueError, match="top-k \\(3\\) exceeds"):
        check_moe_rs(16, 3, 2, 8, 8, 2)
    with pytest.raises(ValueError, match="divide evenly over the world"):
        check_moe_rs(30, 2, 4, 8, 8, 4)
    with pytest.raises(ValueError, match="positive divisor of T/W = 8"):
        check_moe_rs(16, 2, 4, 8, 8, 2, slab_t=3)
    ids = torch.zeros((30, 2), dtype=torch.int32)
    with pytest.raises(ValueError, match="divide evenly"):
        moe_rs_one_device(torch.zeros((4, 60, 8)), torch.zeros((4, 4, 8, 8)), ids, torch.zeros((30, 2)))
    with pytest.raises(ValueError, match="int32"):
        moe_rs_one_device(torch.zeros((2, 32, 8)), torch.zeros((2, 4, 8, 8)), ids.long()[:16], torch.zeros((16, 2)))


def test_a_slab_that_never_completes_times_out_with_its_slot():
    from ovl_runtime.errors import WaitTimeout

    rng = np.random.default_rng()
    world, T, k, E, inter, H = 2, 16, 2, 3, 8, 16
    ids, wts, h, w2 = _inputs(rng, world, T, k, E, inter, H, None)
    args = (torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts))
    state: dict = {}
    moe_rs_one_device(*args, slab_t=4, block_m=16, block_n=16, block_k=16, block_t=4, state=state)
    state["expect"][1, 3] += 5  # rank 1's slab 3 (its second) now waits for notifies no producer sends
    with pytest.raises(WaitTimeout, match="rank 1: wait on signal slot 3") as info:
        moe_rs_one_device(*args, slab_t=4, block_m=16, block_n=16, block_k=16, block_t=4, state=state, timeout_ns=50_000_000)
    assert info.value.expected - info.value.seen == 5


def test_the_torch_api_refuses_bad_input_before_any_launch():
    from ovl_runtime.errors import UsageError
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.moe_ops import moe_grouped_matmul_reduce_scatter, slab_tokens

    g = OneGpuGroup(2)
    h, w = torch.zeros((2, 32, 8), dtype=torch.bfloat16), torch.zeros((2, 4, 8, 16), dtype=torch.bfloat16)
    ids, wts = torch.zeros((2, 16, 2), dtype=torch.int32), torch.zeros((2, 16, 2))
    with pytest.raises(UsageError, match="CUDA"):
        moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g)
    with pytest.raises(UsageError, match="takes torch.bfloat16"):
        moe_grouped_matmul_reduce_scatter(h.float(), ids, wts, w.float(), g)
    assert [slab_tokens(n) for n in (1024, 100, 97, 256, 6)] == [128, 100, 97, 128, 6]
