"""The torch API's backward passes (each operator's ``autograd`` under ``ovl_runtime.operators``) against dense autograd, without a GPU: every rank in
one process (``OneGpuGroup``, tensors stacked ``[world, ...]``), the operators' forward kernels replaced by torch
references of their semantics (the kernels need a GPU; the GPU tests run the real ones), fresh random float64
inputs and cotangents. A dense model of all ranks, written with explicit loops over the ranks, gives the gradients
each rank's ``x`` and ``w`` must get."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ovl_runtime import ops  # noqa: E402
from ovl_runtime._torch_api import collectives  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.groups import OneGpuGroup, resolve_group  # noqa: E402
from ovl_runtime.operators.a2a_gemm import autograd as a2a_gemm_autograd  # noqa: E402
from ovl_runtime.operators.a2a_gemm import op as a2a_gemm_op  # noqa: E402
from ovl_runtime.operators.ag_attention import op as ag_attention_op  # noqa: E402
from ovl_runtime.operators.ag_gemm import autograd as ag_gemm_autograd  # noqa: E402
from ovl_runtime.operators.ag_gemm import op as ag_gemm_op  # noqa: E402
from ovl_runtime.operators.ag_moe import op as ag_moe_op  # noqa: E402
from ovl_runtime.operators.gemm_ar import op as gemm_ar_op  # noqa: E402
from ovl_runtime.operators.gemm_rs import autograd as gemm_rs_autograd  # noqa: E402
from ovl_runtime.operators.gemm_rs import op as gemm_rs_op  # noqa: E402
from ovl_runtime.operators.mlp import api as mlp  # noqa: E402
from ovl_runtime.operators.mlp import autograd as mlp_autograd  # noqa: E402
from ovl_runtime.operators.mlp import op as mlp_op  # noqa: E402
from ovl_runtime.operators.moe_rs import op as moe_rs_op  # noqa: E402

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
        (ag_gemm_op, "_all_gather_matmul_impl", _dense_ag),
        (gemm_rs_op, "_matmul_reduce_scatter_impl", _dense_rs),
        (gemm_ar_op, "_matmul_all_reduce_impl", _dense_ar),
        (a2a_gemm_op, "_all_to_all_matmul_impl", _dense_a2a),
        (mlp_op, "_ag_silu_impl", _dense_ag_silu),
    ):
        monkeypatch.setattr(module, impl, lambda x, w, name, model=model: model(x, w))
    monkeypatch.setattr(ag_gemm_op, "_all_gather_matmul_gathered_impl", lambda x, w, name: (_dense_ag(x, w), _gathered(x)))
    monkeypatch.setattr(a2a_gemm_op, "_all_to_all_matmul_exchanged_impl", lambda x, w, name: (_dense_a2a(x, w), _exchanged(x)))


def _gathered(x):
    """Every rank's copy of ``cat(x over ranks)``, as AllGather+GEMM's buffer holds it after a launch."""
    world = x.shape[0]
    return torch.stack([torch.cat(list(x.unbind(0)))] * world)


def _exchanged(x):
    """Every rank's ``AllToAll(x)`` (row slab q: rank q's slab for this rank), as AllToAll+GEMM's buffer holds it."""
    world, slab = x.shape[0], x.shape[1] // x.shape[0]
    return torch.stack([torch.cat([x[q, r * slab : (r + 1) * slab] for q in range(world)]) for r in range(world)])


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
    ("all_gather_matmul_silu_mul", mlp.all_gather_matmul_silu_mul, 1, 2, _dense_ag_silu),  # all_gather_matmul + SiLU-mul
    ("the fused SiLU-mul op", lambda x, w, g: torch.ops.ovl.all_gather_matmul_silu_mul(x, w, resolve_group(g).name), 1, 2, _dense_ag_silu),
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


#: The launches of a forward and backward with every gradient: the GEMM operators' duals (AllToAll+GEMM's input
#: gradient is a plain collective, not a launch).
DUAL_LAUNCHES = {
    "all_gather_matmul": {"_all_gather_matmul_gathered_impl", "_matmul_reduce_scatter_impl"},
    "matmul_reduce_scatter": {"_matmul_reduce_scatter_impl", "_all_gather_matmul_gathered_impl"},
    "all_to_all_matmul": {"_all_to_all_matmul_exchanged_impl"},
    "all_gather_matmul_silu_mul": {"_all_gather_matmul_gathered_impl", "_matmul_reduce_scatter_impl"},
}


@pytest.mark.parametrize("operator", OPERATORS[:4], ids=[o[0] for o in OPERATORS[:4]])
def test_an_fp16_forward_and_backward_stay_in_fp16_through_the_dual_operators(reference_kernels, monkeypatch, operator):
    """fp16 leaves: every operator launch, forward and backward (the dual overlapped operator), takes fp16 tensors, so
    it runs an fp16 kernel of the library (a bf16 or fp32 one would be another key or refused); the gradients are fp16
    and match the float64 dense gradients to fp16's rounding."""
    launched: list[tuple[str, torch.dtype, torch.dtype]] = []
    for module, impl in (
        (ag_gemm_op, "_all_gather_matmul_impl"),
        (ag_gemm_op, "_all_gather_matmul_gathered_impl"),
        (gemm_rs_op, "_matmul_reduce_scatter_impl"),
        (a2a_gemm_op, "_all_to_all_matmul_impl"),
        (a2a_gemm_op, "_all_to_all_matmul_exchanged_impl"),
        (mlp_op, "_ag_silu_impl"),
    ):
        model = getattr(module, impl)

        def recorded(x, w, name, model=model, impl=impl):
            launched.append((impl, x.dtype, w.dtype))
            return model(x, w, name)

        monkeypatch.setattr(module, impl, recorded)
    _name, call, rows, cols, dense = operator
    world, m, k, n = 2, 4, 8, 6
    g = OneGpuGroup(world)
    x64 = _leaf(world, (world if rows == "world" else rows) * m, k, seed=31)
    w64 = _leaf(world, k, cols * n, seed=32)
    x, w = (t.detach().half().requires_grad_(True) for t in (x64, w64))
    y, (dx, dw) = _grads(lambda x, w: call(x, w, g), x, w, seed=33)
    assert {i for i, *_ in launched} == DUAL_LAUNCHES[_name]
    assert {d for _impl, *ds in launched for d in ds} == {torch.float16}, launched
    assert y.dtype == dx.dtype == dw.dtype == torch.float16
    # The float64 references from the same fp16-rounded inputs: the fp16 path differs by its own rounding only.
    y_ref, (dx_ref, dw_ref) = _dense_grads(dense, x.detach().double(), w.detach().double(), seed=33)
    for got, want in ((y, y_ref), (dx, dx_ref), (dw, dw_ref)):
        assert ((got.double() - want).norm() / want.norm()).item() < 5e-3


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


def test_the_weight_gradients_read_the_operators_gathered_operands(reference_kernels, monkeypatch):
    """AllGather+GEMM keeps the gathered ``x`` it returns beside its output, and GEMM+ReduceScatter's backward takes
    ``AG(dy)`` from its AllGather+GEMM: a training step of the layer runs no plain gather; without a weight
    gradient the forward records the plain operator."""
    gathers = []
    for backward in (ag_gemm_autograd, gemm_rs_autograd, mlp_autograd):  # every GEMM backward the layer's step runs
        monkeypatch.setattr(backward, "gather_rows", lambda x, g: gathers.append(x.shape) or collectives.gather_rows(x, g))
    world, m, hidden, inter = 3, 2, 4, 5
    g = OneGpuGroup(world)
    x, wgu, wd = _leaf(world, m, hidden, seed=30), _leaf(world, hidden, 2 * inter, seed=31), _leaf(world, inter, hidden, seed=32)
    y = mlp.tp_mlp(x, wgu, wd, g)
    assert y.grad_fn is not None
    (y * torch.randn(y.shape, dtype=F64, generator=torch.Generator().manual_seed(33))).sum().backward()
    assert gathers == []
    assert x.grad is not None and wgu.grad is not None and wd.grad is not None
    # Only x needing a gradient: the plain operator, and the down projection's backward without AG(dy).
    frozen = [t.detach() for t in (wgu, wd)]
    xs = x.detach().clone().requires_grad_(True)
    out = ops.all_gather_matmul(xs, frozen[0], g)
    assert "all_gather_matmul_gathered" not in out.grad_fn.name()
    ops.matmul_reduce_scatter(out[..., :inter], frozen[1], g).sum().backward()
    assert gathers == [] and xs.grad is not None


def test_the_gathered_copy_is_the_gathered_input_and_not_differentiable(reference_kernels):
    g = OneGpuGroup(2)
    x, w = _leaf(2, 3, 4, seed=34), _leaf(2, 4, 5, seed=35)
    y, gathered = torch.ops.ovl.all_gather_matmul_gathered(x, w, g.name)
    torch.testing.assert_close(gathered, _gathered(x.detach()))
    assert not gathered.requires_grad and y.requires_grad


def test_all_to_all_matmuls_weight_gradient_reads_the_exchanged_operand(reference_kernels, monkeypatch):
    """With ``w`` requiring grad AllToAll+GEMM keeps the exchanged ``x`` it returns beside its output: the backward
    exchanges only ``dy @ wᵀ`` (for ``dx``), never ``x`` again; the copy is ``AllToAll(x)`` and not differentiable;
    without a weight gradient the forward records the plain operator."""
    exchanges = []
    monkeypatch.setattr(a2a_gemm_autograd, "exchange_slabs", lambda t, g: exchanges.append(t.shape) or collectives.exchange_slabs(t, g))
    world, m, k, n = 3, 2, 4, 5
    g = OneGpuGroup(world)
    x, w = _leaf(world, world * m, k, seed=40), _leaf(world, k, n, seed=41)
    y, exchanged = torch.ops.ovl.all_to_all_matmul_exchanged(x, w, g.name)
    torch.testing.assert_close(exchanged, _exchanged(x.detach()))
    assert not exchanged.requires_grad and y.requires_grad
    out = ops.all_to_all_matmul(x, w, g)
    assert "all_to_all_matmul_exchanged" in out.grad_fn.name()
    (out * torch.randn(out.shape, dtype=F64, generator=torch.Generator().manual_seed(42))).sum().backward()
    assert exchanges == [(world, world * m, k)]  # dx's exchange of dy @ wᵀ only
    _, (dx_ref, dw_ref) = _dense_grads(_dense_a2a, x, w, seed=42)
    torch.testing.assert_close(w.grad, dw_ref)
    torch.testing.assert_close(x.grad, dx_ref)
    frozen = w.detach()
    assert "all_to_all_matmul_exchanged" not in ops.all_to_all_matmul(x, frozen, g).grad_fn.name()


def test_a_gate_up_weight_of_odd_width_is_refused_before_any_launch():
    x, w = _leaf(2, 3, 4, seed=23), _leaf(2, 4, 5, seed=24)
    with pytest.raises(UsageError, match=r"w_gate_up is \[2, 4, 5\]; it must be \[hidden, 2·I\]"):
        mlp.all_gather_matmul_silu_mul(x, w, OneGpuGroup(2))


def test_only_the_inputs_that_need_a_gradient_get_one(reference_kernels):
    g = OneGpuGroup(2)
    x, w = _leaf(2, 3, 4, seed=20), _leaf(2, 4, 5, seed=21).detach()
    ops.all_gather_matmul(x, w, g).sum().backward()
    assert x.grad is not None and w.grad is None


def _dense_attention(q, kv, causal):
    """Every rank's attention over all ranks' keys and values, written out (scores, mask, softmax) per rank:
    ``q`` ``[W, s, H, D]``, ``kv`` ``[W, s, 2, Hkv, D]``."""
    world, s, heads, d = q.shape
    kv_heads = kv.shape[3]
    keys = torch.cat(list(kv.unbind(0)))  # [S, 2, Hkv, D]
    outs = []
    for r in range(world):
        per_head = []
        for h in range(heads):
            k, v = keys[:, 0, h // (heads // kv_heads)], keys[:, 1, h // (heads // kv_heads)]
            scores = q[r, :, h] @ k.T / d**0.5
            if causal:
                later = torch.arange(world * s)[None, :] > (r * s + torch.arange(s))[:, None]
                scores = scores.masked_fill(later, float("-inf"))
            per_head.append(torch.softmax(scores, dim=-1) @ v)
        outs.append(torch.stack(per_head, dim=1))
    return torch.stack(outs)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("world", "s", "heads", "kv_heads", "d"), [(2, 3, 2, 2, 4), (3, 2, 4, 2, 8), (4, 5, 6, 1, 4)])
def test_sequence_parallel_attentions_backward_matches_dense_autograd(monkeypatch, world, s, heads, kv_heads, d, causal):
    """MHA and GQA, causal or not: each rank's dq and its own positions' dk / dv (summed over every rank's queries)."""
    monkeypatch.setattr(ag_attention_op, "_attention_impl", lambda q, kv, name, causal: _dense_attention(q, kv, causal))
    g = OneGpuGroup(world)
    q, kv = _leaf(world, s, heads, d, seed=30 + world), _leaf(world, s, 2, kv_heads, d, seed=31 + world)
    y, (dq, dkv) = _grads(lambda q, kv: ops.sequence_parallel_attention(q, kv, g, causal=causal), q, kv, seed=32)
    y_ref, (dq_ref, dkv_ref) = _dense_grads(lambda q, kv: _dense_attention(q, kv, causal), q, kv, seed=32)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(dq, dq_ref)
    torch.testing.assert_close(dkv, dkv_ref)


def test_reduce_scatter_rows_sums_every_ranks_rows_to_their_owner():
    world, s = 3, 2
    x = torch.randn(world, world * s, 4, generator=torch.Generator().manual_seed(33), dtype=F64)
    got = collectives.reduce_scatter_rows(x, OneGpuGroup(world))
    for r in range(world):
        torch.testing.assert_close(got[r], sum(x[q, r * s : (r + 1) * s] for q in range(world)))


def test_on_each_rank_runs_per_rank_and_stacks_or_once_for_this_rank():
    from types import SimpleNamespace

    a = torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(40), dtype=F64)
    b = torch.randn(3, 4, generator=torch.Generator().manual_seed(41), dtype=F64)

    def fn(r, ar, br):
        return ar @ br + r, None

    summed, nothing = collectives.on_each_rank(OneGpuGroup(3), fn, a, b)
    assert nothing is None
    torch.testing.assert_close(summed, torch.stack([a[r] @ b[r] + r for r in range(3)]))
    # A process holding one rank (as under torchrun): fn once, on the tensors as they are, with that rank.
    mine, nothing = collectives.on_each_rank(SimpleNamespace(stacked=False, rank=2), fn, a[2], b[2])
    assert nothing is None
    torch.testing.assert_close(mine, a[2] @ b[2] + 2)


def _dense_moe_all_gather(x, ids, w):
    """``C[r, t·k + j] = x_all[t] @ w[r, ids[r, t, j]]``, slot by slot."""
    world, tokens, k = ids.shape
    x_all = torch.cat(list(x.unbind(0)))
    return torch.stack([torch.stack([x_all[t] @ w[r, ids[r, t, j]] for t in range(tokens) for j in range(k)]) for r in range(world)])


def _dense_moe_reduce_scatter(h, ids, wts, w):
    """Rank r's token rows of ``Σ_q Σ_j wts[q, t, j] · h[q, t·k + j] @ w[q, ids[q, t, j]]``, slot by slot."""
    world, tokens, k = ids.shape
    total = torch.stack(
        [sum(wts[q, t, j] * (h[q, t * k + j] @ w[q, ids[q, t, j]]) for q in range(world) for j in range(k)) for t in range(tokens)]
    )
    return torch.stack(list(total.chunk(world)))


#: (world, tokens per rank, k, experts, the routing: "random", "one expert" (every slot on expert 0) or "idle" (the last
#: expert gets no token))
ROUTINGS = [(2, 3, 2, 4, "random"), (3, 2, 1, 3, "one expert"), (4, 2, 2, 5, "idle")]


def _routing(world, m, k, experts, kind, seed):
    tokens = world * m
    gen = torch.Generator().manual_seed(seed)
    if kind == "one expert":
        ids = torch.zeros(tokens, k, dtype=torch.int32)
    else:
        top = experts - 1 if kind == "idle" else experts
        ids = torch.stack([torch.randperm(top, generator=gen)[:k] for _ in range(tokens)]).to(torch.int32)
    return ids.expand(world, tokens, k).contiguous()


@pytest.mark.parametrize(("world", "m", "k", "experts", "kind"), ROUTINGS, ids=[r[4] for r in ROUTINGS])
def test_moe_all_gather_grouped_matmuls_backward_matches_dense_autograd(monkeypatch, world, m, k, experts, kind):
    monkeypatch.setattr(ag_moe_op, "_moe_impl", lambda x, ids, w, name, validate: _dense_moe_all_gather(x, ids, w))
    g = OneGpuGroup(world)
    ids = _routing(world, m, k, experts, kind, seed=40)
    x, w = _leaf(world, m, 6, seed=41), _leaf(world, experts, 6, 4, seed=42)
    y, (dx, dw) = _grads(lambda x, w: ops.moe_all_gather_grouped_matmul(x, ids, w, g), x, w, seed=43)
    y_ref, (dx_ref, dw_ref) = _dense_grads(lambda x, w: _dense_moe_all_gather(x, ids, w), x, w, seed=43)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(dx, dx_ref)
    torch.testing.assert_close(dw, dw_ref)
    if kind == "idle":
        assert not dw[:, experts - 1].any()  # an expert no token reached gets a zero gradient


@pytest.mark.parametrize(("world", "m", "k", "experts", "kind"), ROUTINGS, ids=[r[4] for r in ROUTINGS])
def test_moe_grouped_matmul_reduce_scatters_backward_matches_dense_autograd(monkeypatch, world, m, k, experts, kind):
    """Every input's gradient, the routing weights' included (each rank's copy gets its own slice's share)."""
    monkeypatch.setattr(moe_rs_op, "_impl", lambda h, ids, wts, w, name: _dense_moe_reduce_scatter(h, ids, wts, w))
    g = OneGpuGroup(world)
    tokens = world * m
    ids = _routing(world, m, k, experts, kind, seed=50)
    h, wts, w = _leaf(world, tokens * k, 6, seed=51), _leaf(world, tokens, k, seed=52), _leaf(world, experts, 6, 5, seed=53)
    fn = lambda h, wts, w: torch.ops.ovl.moe_grouped_matmul_reduce_scatter(h, ids, wts, w, resolve_group(g).name)  # noqa: E731
    y, grads = _grads(fn, h, wts, w, seed=54)
    y_ref, grads_ref = _dense_grads(lambda h, wts, w: _dense_moe_reduce_scatter(h, ids, wts, w), h, wts, w, seed=54)
    torch.testing.assert_close(y, y_ref)
    for got, want in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(got, want)


def test_moe_backward_refuses_experts_outside_the_weights():
    from ovl_runtime.operators.ag_moe.autograd import by_expert as _by_expert

    with pytest.raises(UsageError, match=r"outside \[0, 3\)"):
        _by_expert(torch.tensor([[0, 3]]), 3, "moe")
    with pytest.raises(UsageError, match=r"outside \[0, 3\)"):
        _by_expert(torch.tensor([[-1, 2]]), 3, "moe")
    groups = _by_expert(torch.tensor([[2, 0], [2, 1]]), 4, "moe")
    assert [(e, s.tolist()) for e, s in groups] == [(0, [1]), (1, [3]), (2, [0, 2])]
