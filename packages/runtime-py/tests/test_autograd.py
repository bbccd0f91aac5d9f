"""The torch API's backward passes (``ovl_runtime.autograd``) against dense autograd, without a GPU: every rank in
one process (``OneGpuGroup``, tensors stacked ``[world, ...]``), the operators' forward kernels replaced by torch
references of their semantics (the kernels need a GPU; the GPU tests run the real ones), fresh random float64
inputs and cotangents. A dense model of all ranks, written with explicit loops over the ranks, gives the gradients
each rank's ``x`` and ``w`` must get."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ovl_runtime import mlp, moe_ops, ops  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.groups import OneGpuGroup, resolve_group  # noqa: E402

F64 = torch.float64


def _dense_ag(x, w):
    full = torch.cat(list(x.unbind(0)))
    return torch.stack([full @ w[r] for r in range(x.shape[0])])


def _dense_rs(x, w):
    world = x.shape[0]
    total = sum(x[r] @ w[r] for r in range(world))
    return torch.stack(list(total.chunk(world)))


def _dense_ar(x, w):
    total = sum(x[r] @ w[r] for r in range(x.shape[0]))
    return torch.stack([total] * x.shape[0])


def _dense_a2a(x, w):
    world, slab = x.shape[0], x.shape[1] // x.shape[0]
    received = [torch.cat([x[q, r * slab : (r + 1) * slab] for q in range(world)]) for r in range(world)]
    return torch.stack([received[r] @ w[r] for r in range(world)])


def _dense_ag_silu(x, w):
    inter = w.shape[-1] // 2
    return torch.stack([torch.nn.functional.silu(gu[:, :inter]) * gu[:, inter:] for gu in _dense_ag(x, w).unbind(0)])


@pytest.fixture
def reference_kernels(monkeypatch):
    """The forward of each GEMM operator as torch computes it (the dense models), in place of its kernels."""
    for module, impl, model in (
        (ops, "_all_gather_matmul_impl", _dense_ag),
        (ops, "_matmul_reduce_scatter_impl", _dense_rs),
        (ops, "_matmul_all_reduce_impl", _dense_ar),
        (ops, "_all_to_all_matmul_impl", _dense_a2a),
        (mlp, "_ag_silu_impl", _dense_ag_silu),
    ):
        monkeypatch.setattr(module, impl, lambda x, w, name, model=model: model(x, w))


def _leaf(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).requires_grad_(True)


def _grads(fn, *inputs: torch.Tensor, seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    out = fn(*inputs)
    cot = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=F64)
    (out * cot).sum().backward()
    grads = [t.grad.clone() for t in inputs]
    for t in inputs:
        t.grad = None
    return out.detach(), grads


def _dense_grads(fn, *inputs: torch.Tensor, seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    return _grads(fn, *leaves, seed=seed)


SHAPES = [(2, 3, 5, 4), (4, 2, 6, 3), (3, 4, 2, 5)]  # world, rows per rank, depth, columns


#: (operator, its call, rows of x per rank in units of m, columns of w in units of n, the dense model of all ranks)
OPERATORS = [
    ("all_gather_matmul", ops.all_gather_matmul, 1, 1, _dense_ag),
    ("matmul_reduce_scatter", ops.matmul_reduce_scatter, "world", 1, _dense_rs),
    ("all_to_all_matmul", ops.all_to_all_matmul, "world", 1, _dense_a2a),
    ("all_gather_matmul_silu_mul", mlp.all_gather_matmul_silu_mul, 1, 2, _dense_ag_silu),
]


@pytest.mark.parametrize("operator", OPERATORS, ids=[o[0] for o in OPERATORS])
@pytest.mark.parametrize(("world", "m", "k", "n"), SHAPES)
def test_each_gemm_operators_backward_matches_dense_autograd(reference_kernels, operator, world, m, k, n):
    _name, call, rows, cols, dense = operator
    g = OneGpuGroup(world)
    x = _leaf(world, (world if rows == "world" else rows) * m, k, seed=world + m)
    w = _leaf(world, k, cols * n, seed=world + k)
    y, (dx, dw) = _grads(lambda x, w: call(x, w, g), x, w, seed=world + n)
    y_ref, (dx_ref, dw_ref) = _dense_grads(dense, x, w, seed=world + n)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(dx, dx_ref)
    torch.testing.assert_close(dw, dw_ref)


@pytest.mark.parametrize(("world", "m", "k", "n"), SHAPES)
def test_matmul_all_reduce_backward_is_the_row_parallel_layers(reference_kernels, world, m, k, n):
    """Every rank's loss reads the same replicated output with the same cotangent (a model after a row-parallel
    layer): the gradient of one rank's loss, taken through the AllReduce's identity backward."""
    g = OneGpuGroup(world)
    x, w = _leaf(world, m, k, seed=10), _leaf(world, k, n, seed=11)
    out = ops.matmul_all_reduce(x, w, g)
    cot = torch.randn(m, n, generator=torch.Generator().manual_seed(12), dtype=F64)
    (out * cot).sum().backward()
    xr, wr = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    (sum(xr[r] @ wr[r] for r in range(world)) * cot).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    torch.testing.assert_close(w.grad, wr.grad)


def test_the_tp_mlp_layer_trains_like_the_dense_mlp(reference_kernels):
    """Both halves chained: every rank's gate/up and down weights get the dense MLP's gradients."""
    world, m, hidden, inter = 4, 3, 6, 5
    g = OneGpuGroup(world)
    x, wgu, wd = _leaf(world, m, hidden, seed=16), _leaf(world, hidden, 2 * inter, seed=17), _leaf(world, inter, hidden, seed=18)

    def dense(x, wgu, wd):
        full = torch.cat([x[r] for r in range(world)])
        total = 0
        for r in range(world):
            gu = full @ wgu[r]
            total = total + (torch.nn.functional.silu(gu[:, :inter]) * gu[:, inter:]) @ wd[r]
        return torch.stack([total[r * m : (r + 1) * m] for r in range(world)])

    y, grads = _grads(lambda x, a, b: mlp.tp_mlp(x, a, b, g), x, wgu, wd, seed=19)
    y_ref, grads_ref = _dense_grads(dense, x, wgu, wd, seed=19)
    torch.testing.assert_close(y, y_ref)
    for got, want in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(got, want)


def test_only_the_inputs_that_need_a_gradient_get_one(reference_kernels):
    g = OneGpuGroup(2)
    x, w = _leaf(2, 3, 4, seed=20), _leaf(2, 4, 5, seed=21).detach()
    ops.all_gather_matmul(x, w, g).sum().backward()
    assert x.grad is not None and w.grad is None


def test_forward_only_operators_say_so_on_backward(monkeypatch):
    g = OneGpuGroup(2)
    monkeypatch.setattr(ops, "_attention_impl", lambda q, kv, name, causal: q * 1)
    q = _leaf(2, 4, 2, 8, seed=22).float()
    kv = torch.randn(2, 4, 2, 2, 8)
    out = ops.sequence_parallel_attention(q, kv, g)
    with pytest.raises(UsageError, match="sequence_parallel_attention has no backward"):
        out.sum().backward()
    monkeypatch.setattr(moe_ops, "_impl", lambda h, ids, wts, w, name: torch.zeros(2, 4, 8, dtype=h.dtype))
    h = torch.randn(2, 8, 6, requires_grad=True)
    ids = torch.zeros(2, 8, 1, dtype=torch.int32)
    out = torch.ops.ovl.moe_grouped_matmul_reduce_scatter(h, ids, torch.ones(2, 8, 1), torch.randn(2, 3, 6, 8), resolve_group(g).name)
    with pytest.raises(UsageError, match="moe_grouped_matmul_reduce_scatter has no backward"):
        out.sum().backward()
