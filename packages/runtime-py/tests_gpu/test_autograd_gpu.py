"""The torch API's backward passes on a GPU, every rank in one process (``OneGpuGroup``): each GEMM operator, the
tensor-parallel MLP layer, sequence-parallel attention (MHA causal, GQA not) and both MoE operators (a routing
that leaves an expert idle) trained one step, their gradients against fp32 dense autograd over all ranks'
tensors. A GEMM operator's backward runs the dual overlapped operator (AllGather+GEMM's is a
GEMM+ReduceScatter and the reverse), compiled for its own shape; attention's and MoE's are plain torch.

Needs a CUDA device and the compiled kernels: the keys below on ``$OVL_KERNELS`` (made on a machine with ovl's
CLI by ``python tests_gpu/test_autograd_gpu.py --prepare DIR``) or a compiler at hand (``$OVL_CLI``).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import by_slot, prepare_main, rand, rel, unavailable  # noqa: E402

from ovl_runtime import ops as _ops  # noqa: E402, F401 - sets CUDA_DEVICE_MAX_CONNECTIONS before CUDA starts
from ovl_runtime._kernels import library as lib  # noqa: E402
from ovl_runtime.operators.ag_moe.routing import draw_routing  # noqa: E402

W, M, K, N = 2, 256, 512, 256  # world, rows of all ranks, depth, columns
HID, INTER = 256, 256  # the MLP layer's hidden and intermediate size (per rank)

#: (operator, world, M, N, K) of every forward and backward these tests run.
KEYS = [
    ("ag-gemm", W, M, N, K),  # all_gather_matmul: x [M/W, K], w [K, N]
    ("gemm-rs", W, M, K, N),  # its backward's dx: RS(dy @ wᵀ)
    ("gemm-rs", W, M, N, K),  # matmul_reduce_scatter: x [M, K], w [K, N]
    ("ag-gemm", W, M, K, N),  # its backward's dx: AG(dy) @ wᵀ
    ("gemm-ar", W, M, N, K),
    ("a2a-gemm", W, M, N, K),
    ("ag-gemm-silu", W, M, INTER, HID),  # the MLP layer: gate/up without grad
    ("ag-gemm", W, M, 2 * INTER, HID),  # gate/up where autograd records (the product kept)
    ("gemm-rs", W, M, HID, 2 * INTER),  # its backward's dx
    ("gemm-rs", W, M, HID, INTER),  # down
    ("ag-gemm", W, M, INTER, HID),  # its backward's dx
]
#: (sequence, heads, kv heads, head dim, causal) of the attention cases.
ATTENTION = [(1024, 4, 4, 64, True), (1024, 4, 2, 64, False)]
EXPERTS, TOPK = 8, 2  # the MoE cases: part 1 x [M/W, K] → [M·k, N]; part 2 h [M·k, INTER] → [M/W, HID]


def all_keys() -> list[lib.KernelKey]:
    attention = [lib.KernelKey("ag-attention", W, s, h * d, 2 * g * d, heads=h, causal=c) for s, h, g, d, c in ATTENTION]
    moe = [  # the keys the calls bind: by default the operators for every token count
        lib.call_key("ag-moe", W, M, N, K, "bf16", experts=EXPERTS, topk=TOPK),
        lib.call_key("moe-rs", W, M, HID, INTER, "bf16", experts=EXPERTS, topk=TOPK),
    ]
    return [lib.call_key(*k) for k in KEYS] + attention + moe


pytestmark = pytest.mark.skipif(unavailable(all_keys()) is not None, reason=unavailable(all_keys()) or "")


def _leaf(*shape: int, seed: int, scale: float = 8) -> torch.Tensor:
    return (rand(*shape, seed=seed) / scale).requires_grad_(True)


def _step(fn, inputs, cot):
    """Output and gradients of ``(fn(*inputs) * cot).sum()``."""
    out = fn(*inputs)
    (out.float() * cot).sum().backward()
    return out.detach(), [t.grad for t in inputs]


def _dense(fn, inputs, cot):
    leaves = [t.detach().float().requires_grad_(True) for t in inputs]
    return _step(fn, leaves, cot)


def _check(got, want, tol=0.02):
    (y, grads), (y_ref, grads_ref) = got, want
    assert rel(y, y_ref) < tol
    for g, r in zip(grads, grads_ref, strict=True):
        assert g.dtype == torch.bfloat16 and g.shape == r.shape and rel(g, r) < tol


def _gathered(x):
    return torch.cat(list(x.unbind(0)))


def test_all_gather_matmul_trains():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(W)
    x, w = _leaf(W, M // W, K, seed=1), _leaf(W, K, N, seed=2)
    cot = rand(W, M, N, seed=3).float()
    got = _step(lambda x, w: ops.all_gather_matmul(x, w, g), [x, w], cot)
    ops.synchronize(g)
    _check(got, _dense(lambda x, w: torch.stack([_gathered(x) @ w[r] for r in range(W)]), [x, w], cot))


def test_matmul_reduce_scatter_trains():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(W)
    x, w = _leaf(W, M, K, seed=4), _leaf(W, K, N, seed=5)
    cot = rand(W, M // W, N, seed=6).float()

    def dense(x, w):
        return sum(x[r] @ w[r] for r in range(W)).view(W, M // W, N)

    got = _step(lambda x, w: ops.matmul_reduce_scatter(x, w, g), [x, w], cot)
    ops.synchronize(g)
    _check(got, _dense(dense, [x, w], cot))


def test_matmul_all_reduce_and_all_to_all_matmul_train():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(W)
    x, w = _leaf(W, M, K, seed=7), _leaf(W, K, N, seed=8)
    # A replicated output read the same way on every rank (a model after a row-parallel layer): each rank's
    # gradients are those of one rank's loss, the AllReduce's backward being the identity.
    cot = rand(M, N, seed=9).float()
    y, grads = _step(lambda x, w: ops.matmul_all_reduce(x, w, g), [x, w], cot)
    ops.synchronize(g)
    y_ref, grads_ref = _dense(lambda x, w: sum(x[r] @ w[r] for r in range(W)), [x, w], cot)
    _check((y, grads), (y_ref.expand(W, M, N), grads_ref))

    x, w = _leaf(W, M, K, seed=10), _leaf(W, K, N, seed=11)
    cot = rand(W, M, N, seed=12).float()
    slab = M // W

    def dense(x, w):
        received = [torch.cat([x[q, r * slab : (r + 1) * slab] for q in range(W)]) for r in range(W)]
        return torch.stack([received[r] @ w[r] for r in range(W)])

    got = _step(lambda x, w: ops.all_to_all_matmul(x, w, g), [x, w], cot)
    ops.synchronize(g)
    _check(got, _dense(dense, [x, w], cot))


def test_the_tp_mlp_layer_trains_like_the_dense_mlp():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.ops import tp_mlp

    g = OneGpuGroup(W)
    x, wgu, wd = (
        _leaf(W, M // W, HID, seed=13, scale=4),
        _leaf(W, HID, 2 * INTER, seed=14, scale=16),
        _leaf(W, INTER, HID, seed=15, scale=16),
    )
    cot = rand(W, M // W, HID, seed=16).float()

    def dense(x, wgu, wd):
        full = _gathered(x)
        total = 0
        for r in range(W):
            gu = full @ wgu[r]
            total = total + (torch.nn.functional.silu(gu[:, :INTER]) * gu[:, INTER:]) @ wd[r]
        return total.view(W, M // W, HID)

    got = _step(lambda x, a, b: tp_mlp(x, a, b, g), [x, wgu, wd], cot)
    ops.synchronize(g)
    _check(got, _dense(dense, [x, wgu, wd], cot), tol=0.03)


@pytest.mark.parametrize(("seq", "heads", "kv_heads", "d", "causal"), ATTENTION)
def test_sequence_parallel_attention_trains(seq, heads, kv_heads, d, causal):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(W)
    s = seq // W
    q, kv = _leaf(W, s, heads, d, seed=20, scale=1), _leaf(W, s, 2, kv_heads, d, seed=21, scale=1)
    cot = rand(W, s, heads, d, seed=22).float()

    def dense(q, kv):
        keys = _gathered(kv)  # [S, 2, Hkv, D]
        k = keys[:, 0].repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1)  # [H, S, D]
        v = keys[:, 1].repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1)
        outs = []
        for r in range(W):
            scores = q[r].transpose(0, 1) @ k.transpose(1, 2) / d**0.5  # [H, s, S]
            if causal:
                later = torch.arange(seq, device=q.device)[None, :] > (r * s + torch.arange(s, device=q.device))[:, None]
                scores = scores.masked_fill(later, float("-inf"))
            outs.append((torch.softmax(scores, dim=-1) @ v).transpose(0, 1))
        return torch.stack(outs)

    got = _step(lambda q, kv: ops.sequence_parallel_attention(q, kv, g, causal=causal), [q, kv], cot)
    ops.synchronize(g)
    _check(got, _dense(dense, [q, kv], cot))


def _routing(tokens: int, seed: int) -> torch.Tensor:
    """Every rank's copy of one routing that leaves expert 0 without tokens."""
    ids = draw_routing(np.random.default_rng(seed), tokens, TOPK, EXPERTS, range(1, EXPERTS))
    return torch.from_numpy(ids).cuda().expand(W, tokens, TOPK).contiguous()


def test_moe_all_gather_grouped_matmul_trains():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(W)
    ids = _routing(M, seed=23)
    x, w = _leaf(W, M // W, K, seed=24), _leaf(W, EXPERTS, K, N, seed=25)
    cot = rand(W, M * TOPK, N, seed=26).float()

    def dense(x, w):
        full = _gathered(x)
        return torch.stack([by_slot(ids[r], lambda e, sl, r=r: full[sl // TOPK] @ w[r, e]) for r in range(W)])

    got = _step(lambda x, w: ops.moe_all_gather_grouped_matmul(x, ids, w, g), [x, w], cot)
    ops.synchronize(g)
    _check(got, _dense(dense, [x, w], cot))
    assert not got[1][1][:, 0].any()  # the idle expert's weights get no gradient


def test_moe_grouped_matmul_reduce_scatter_trains():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.operators.moe_rs import api as moe_ops

    g = OneGpuGroup(W)
    ids = _routing(M, seed=27)
    h, w = _leaf(W, M * TOPK, INTER, seed=28), _leaf(W, EXPERTS, INTER, HID, seed=29)
    wts = torch.rand(M, TOPK, device="cuda", generator=torch.Generator(device="cuda").manual_seed(30))
    wts = wts.expand(W, M, TOPK).contiguous().requires_grad_(True)
    cot = rand(W, M // W, HID, seed=31).float()

    def dense(h, wts, w):
        total = 0
        for r in range(W):
            partial = by_slot(ids[r], lambda e, sl, r=r: h[r, sl] @ w[r, e])  # [M·k, HID]
            total = total + (partial.view(M, TOPK, HID) * wts[r, :, :, None].float()).sum(1)
        return total.view(W, M // W, HID)

    y, (dh, dwts, dw) = _step(lambda h, wts, w: moe_ops.moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g), [h, wts, w], cot)
    ops.synchronize(g)
    y_ref, (dh_ref, dwts_ref, dw_ref) = _dense(dense, [h, wts, w], cot)
    _check((y, [dh, dw]), (y_ref, [dh_ref, dw_ref]))
    assert dwts.dtype == torch.float32 and rel(dwts, dwts_ref) < 0.02


if __name__ == "__main__":
    prepare_main("test_autograd_gpu.py", all_keys)
