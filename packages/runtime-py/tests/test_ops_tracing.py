"""The torch API's operators under PyTorch's tracers, without a GPU: each is one ``torch.ops.ovl`` node whose
fake output has the shape the operator returns, so ``make_fx`` and ``torch.compile(fullgraph=True)`` take a
model that calls them whole (the kernels only run when the traced graph does)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from ovl_runtime import ops  # noqa: E402
from ovl_runtime.groups import OneGpuGroup  # noqa: E402
from ovl_runtime.operators.mlp import api as mlp  # noqa: E402
from ovl_runtime.operators.moe_rs import api as moe_ops  # noqa: E402

W, ROWS, K, N = 4, 64, 128, 96  # ranks, rows per rank, depth, columns
BF16 = torch.bfloat16


def _rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(BF16)


def _ids(*shape: int, experts: int) -> torch.Tensor:
    return torch.randint(0, experts, shape, dtype=torch.int32)


def _cases(g: OneGpuGroup):
    """(operator, function, inputs, the output shape it returns for the stacked one-GPU group)."""
    experts, topk, attn_s, heads, kv_heads, d = 8, 2, 32, 4, 2, 16
    return [
        ("all_gather_matmul", lambda x, w: ops.all_gather_matmul(x, w, g), (_rand(W, ROWS, K), _rand(W, K, N)), (W, W * ROWS, N)),
        (
            "matmul_reduce_scatter",
            lambda x, w: ops.matmul_reduce_scatter(x, w, g),
            (_rand(W, W * ROWS, K), _rand(W, K, N)),
            (W, ROWS, N),
        ),
        ("matmul_all_reduce", lambda x, w: ops.matmul_all_reduce(x, w, g), (_rand(W, W * ROWS, K), _rand(W, K, N)), (W, W * ROWS, N)),
        ("all_to_all_matmul", lambda x, w: ops.all_to_all_matmul(x, w, g), (_rand(W, W * ROWS, K), _rand(W, K, N)), (W, W * ROWS, N)),
        (
            "all_gather_matmul_silu_mul",
            lambda x, w: mlp.all_gather_matmul_silu_mul(x, w, g),
            (_rand(W, ROWS, K), _rand(W, K, 2 * N)),
            (W, W * ROWS, N),
        ),
        (
            "sequence_parallel_attention",
            lambda q, kv: ops.sequence_parallel_attention(q, kv, g, causal=True),
            (_rand(W, attn_s, heads, d), _rand(W, attn_s, 2, kv_heads, d)),
            (W, attn_s, heads, d),
        ),
        (
            "moe_all_gather_grouped_matmul",
            lambda x, ids, w: ops.moe_all_gather_grouped_matmul(x, ids, w, g),
            (_rand(W, ROWS, K), _ids(W, W * ROWS, topk, experts=experts), _rand(W, experts, K, N)),
            (W, W * ROWS * topk, N),
        ),
        (
            "moe_grouped_matmul_reduce_scatter",
            lambda h, ids, wts, w: moe_ops.moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g),
            (
                _rand(W, W * ROWS * topk, K),
                _ids(W, W * ROWS, topk, experts=experts),
                torch.rand(W, W * ROWS, topk),
                _rand(W, experts, K, N),
            ),
            (W, ROWS, N),
        ),
    ]


@pytest.mark.parametrize("index", range(8))
def test_each_operator_traces_as_one_op_with_the_shape_it_returns(index):
    g = OneGpuGroup(W)
    name, fn, inputs, shape = _cases(g)[index]
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    ovl = [n for n in calls if str(n.target).startswith("ovl.")]
    assert [str(n.target) for n in ovl] == [f"ovl.{name}.default"]
    assert tuple(ovl[0].meta["val"].shape) == shape
    assert ovl[0].meta["val"].dtype == BF16


class _Traced(Exception):
    pass


def test_torch_compile_takes_the_tensor_parallel_mlp_layer_as_one_graph():
    """``fullgraph=True``: no graph break around either operator; the backend sees both ovl ops and the
    layer's output shape (it stops before anything runs: the kernels need a GPU)."""
    g = OneGpuGroup(W)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)

        def run(*args):
            raise _Traced

        return run

    layer = torch.compile(lambda x, wgu, wd: mlp.tp_mlp(x, wgu, wd, g), backend=backend, fullgraph=True)
    with pytest.raises(_Traced):
        layer(_rand(W, ROWS, K), _rand(W, K, 2 * N), _rand(W, N, K))
    (gm,) = graphs
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and str(n.target).startswith("ovl.")]
    assert [str(n.target) for n in nodes] == ["ovl.all_gather_matmul_silu_mul", "ovl.matmul_reduce_scatter"]
    assert tuple(nodes[0].meta["example_value"].shape) == (W, W * ROWS, N)
    assert tuple(nodes[1].meta["example_value"].shape) == (W, ROWS, K)


def test_torch_compile_traces_the_layers_training_step_through_the_dual_operators():
    """AOTAutograd's joint graph of the layer (weights requiring grad): the forward records the AllGather+GEMM
    that keeps its gathered input, and the backward runs each half's dual overlapped operator (GEMM+ReduceScatter's
    the AllGather+GEMM that returns ``AG(dy)`` for the weight gradient). The compilers stop before anything runs."""
    from functorch.compile import default_partition, make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    g = OneGpuGroup(W)
    graphs = {}

    def compiler(gm, example_inputs):
        def run(*args):
            raise _Traced

        return make_boxed_func(run)

    def partition(joint, inputs, **kwargs):
        graphs["joint"] = joint
        return default_partition(joint, inputs, **kwargs)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler, partition_fn=partition)
    layer = torch.compile(lambda x, wgu, wd: mlp.tp_mlp(x, wgu, wd, g), backend=backend, fullgraph=True)
    leaves = [t.requires_grad_(True) for t in (_rand(W, ROWS, K), _rand(W, K, 2 * N), _rand(W, N, K))]
    with pytest.raises(_Traced):
        layer(*leaves)
    calls = [n for n in graphs["joint"].graph.nodes if n.op == "call_function"]
    ovl = [str(n.target) for n in calls if str(n.target).startswith("ovl.")]
    assert ovl == ["ovl.all_gather_matmul_gathered.default", "ovl.matmul_reduce_scatter.default"] * 2


@pytest.mark.parametrize(
    ("op", "rows_in", "rows_out"),
    [("all_gather_matmul_gathered", ROWS, W * ROWS), ("all_to_all_matmul_exchanged", W * ROWS, W * ROWS)],
)
def test_the_variants_keeping_their_moved_input_trace_with_both_outputs(op, rows_in, rows_out):
    """``all_gather_matmul_gathered``'s and ``all_to_all_matmul_exchanged``'s fakes return the output and the moved
    input (gathered, exchanged), each of the shape the kernel's call returns."""
    g = OneGpuGroup(W)
    gm = make_fx(lambda x, w: getattr(torch.ops.ovl, op)(x, w, g.name), tracing_mode="fake")(_rand(W, rows_in, K), _rand(W, K, N))
    (node,) = [n for n in gm.graph.nodes if str(n.target).startswith("ovl.")]
    out, moved = node.meta["val"]
    assert tuple(out.shape) == (W, rows_out, N) and tuple(moved.shape) == (W, rows_out, K)
