"""The torch API on a GPU, every rank in one process (``OneGpuGroup``): numerics against
torch, CUDA-graph capture and replay, the TP MLP and block, bad input and a wait that times out.

Needs a CUDA device and the compiled kernels: the keys below on ``$OVL_KERNELS`` (made on a
machine with ovl's CLI by ``python tests_gpu/test_torch_api_gpu.py --prepare DIR``) or a compiler
at hand (``$OVL_CLI``). Skipped otherwise. Times here are not performance figures.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from support import counted_compiles, dtypes, prepare_main, rand, rel, unavailable  # noqa: E402

from ovl_runtime import ops as _ops  # noqa: E402, F401 - sets CUDA_DEVICE_MAX_CONNECTIONS before CUDA starts
from ovl_runtime._kernels import library as lib  # noqa: E402

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "tp_block.py"

#: (operator, world, M, N, K) of every compiled operator these tests call besides the block's.
KEYS = [
    ("ag-gemm", 2, 256, 256, 512),
    ("ag-gemm", 4, 400, 256, 512),  # 100 rows per rank: chunks off the 128-row blocks
    ("ag-gemm", 8, 1024, 256, 512),
    ("gemm-rs", 2, 1024, 512, 256),
    ("gemm-rs", 8, 1024, 512, 256),  # also 800 rows, padded to 8 x 128
    ("gemm-ar", 2, 1024, 256, 256),
    ("gemm-ar", 4, 1024, 256, 256),  # 1000 rows, padded to 4 x 256
    ("gemm-ar", 8, 1024, 256, 256),
    ("a2a-gemm", 2, 1024, 256, 256),
    ("a2a-gemm", 4, 1024, 256, 256),
    ("a2a-gemm", 8, 1024, 256, 256),
]
#: (operator, world, M, N, K) of the fp8 (e4m3, per-tensor scales) AllGather+GEMM tests, compiled in fp8e4m3.
FP8_KEYS = [("ag-gemm", 2, 1024, 256, 512), ("ag-gemm", 4, 1024, 256, 512)]
#: (world, sequence, heads, kv heads, head dim, causal) of the sequence-parallel attention tests.
ATTENTION = [
    (2, 1024, 4, 4, 64, True),
    (2, 1024, 4, 2, 64, False),
    (4, 1024, 8, 2, 64, True),
    (8, 1024, 8, 8, 64, False),
    (8, 2048, 8, 2, 128, True),
    (2, 2048, 8, 2, 128, True),  # the layer test's world-2 shape
]


def attention_key(world: int, seq: int, heads: int, kv_heads: int, d: int, causal: bool, dtype: str = "bf16") -> lib.KernelKey:
    return lib.KernelKey("ag-attention", world, seq, heads * d, 2 * kv_heads * d, dtype, heads=heads, causal=causal)


def attention_rows_key(world: int, seq: int, heads: int, kv_heads: int, d: int, causal: bool, dtype: str = "bf16") -> lib.KernelKey:
    return lib.call_key("ag-attention", world, seq, heads * d, 2 * kv_heads * d, dtype, heads=heads, causal=causal)


def _example():
    spec = importlib.util.spec_from_file_location("tp_block", EXAMPLE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tp_block"] = mod
    spec.loader.exec_module(mod)
    return mod


def all_keys() -> list[lib.KernelKey]:
    block = _example().Config()
    # The numerics tests run in every dtype the operators take (bf16, fp16; fp8 for AllGather+GEMM); the block's in
    # bf16. AllGather+GEMM, GEMM+ReduceScatter, GEMM+AllReduce and AllToAll+GEMM both ways: the any-row-count operator (the default)
    # and the one of each row count (the tests that need the overlapped kernel at shapes where the any-row-count one
    # runs the plain sequence).
    operators = [lib.call_key(*k, d) for k in KEYS for d in lib.COMMON_DTYPES]
    own = [lib.KernelKey(*k, d) for k in KEYS if k[0] in lib.ROWS_OPERATORS for d in lib.COMMON_DTYPES]
    attention = [attention_key(*a, dtype=d) for a in ATTENTION for d in lib.COMMON_DTYPES]
    # The attention for every sequence length (the torch API's default, ``call_key``) at ATTENTION's shapes.
    attention += [attention_rows_key(*a, dtype=d) for a in ATTENTION for d in lib.COMMON_DTYPES]
    fp8 = [key for k in FP8_KEYS for key in (lib.call_key(*k, "fp8e4m3"), lib.KernelKey(*k, "fp8e4m3"))]
    return operators + own + attention + fp8 + block.keys(2) + block.keys(8)


#: Parametrizes a numerics test over the dtypes the operators take.
over_dtypes = pytest.mark.parametrize("dtype", dtypes(), ids=lambda d: str(d).removeprefix("torch."))


@functools.cache
def _missing(op: str | None) -> str | None:
    """Why the kernels of ``op`` (every test's: ``None``) cannot be had here, or None."""
    return unavailable([k for k in all_keys() if op is None or k.op == op])


pytestmark = pytest.mark.skipif(unavailable([]) is not None, reason=unavailable([]) or "")


@pytest.fixture(autouse=True)
def _kernels_at_hand(request: pytest.FixtureRequest) -> None:
    """Skip a test whose kernels are neither found nor compilable: one operator's where it is marked
    ``kernels(op)`` (so a directory prepared for that operator alone runs its tests), else every key's."""
    mark = request.node.get_closest_marker("kernels")
    why = _missing(None if mark is None else mark.args[0])
    if why is not None:
        pytest.skip(why)


@over_dtypes
@pytest.mark.parametrize("any_rows", [True, False], ids=["any-rows", "per-m"])
@pytest.mark.parametrize(("world", "m", "n", "k"), [(2, 128, 256, 512), (4, 100, 256, 512), (8, 128, 256, 512)])
def test_all_gather_matmul_matches_torch(world, m, n, k, any_rows, dtype, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    # Both operators: the any-row-count one (the plain sequence at these small shapes, as the compiler's simulated
    # crossover says) and the overlapped one compiled for this row count.
    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)
    g = OneGpuGroup(world)
    for step in range(3):  # fresh inputs each call, one compiled operator
        x, w = rand(world, m, k, seed=step, dtype=dtype) / 8, rand(world, k, n, seed=10 + step, dtype=dtype) / 8
        y = ops.all_gather_matmul(x, w, g)
        full = x.reshape(world * m, k).float()
        want = torch.stack([full @ w[r].float() for r in range(world)])
        ops.synchronize(g)
        assert y.shape == (world, world * m, n) and y.dtype == dtype and rel(y, want) < 0.01
    assert len(ops.operators()) == 1


@over_dtypes
@pytest.mark.parametrize("any_rows", [True, False], ids=["any-rows", "per-m"])
@pytest.mark.parametrize(("world", "rows"), [(2, 1024), (8, 1024), (8, 800)])
@pytest.mark.kernels("gemm-rs")
def test_matmul_reduce_scatter_matches_torch(world, rows, any_rows, dtype, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    # Both operators: the any-row-count one (the plain sequence below its range or the compiler's crossover) and the
    # overlapped one compiled for this row count (its slabs padded to whole row blocks).
    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)
    g = OneGpuGroup(world)
    x, w = rand(world, rows, 256, seed=1, dtype=dtype) / 8, rand(world, 256, 512, seed=2, dtype=dtype) / 8
    y = ops.matmul_reduce_scatter(x, w, g)
    total = sum(x[r].float() @ w[r].float() for r in range(world))
    want = total.view(world, rows // world, 512)
    ops.synchronize(g)
    assert y.shape == (world, rows // world, 512) and y.dtype == dtype and rel(y, want) < 0.01


@over_dtypes
@pytest.mark.parametrize(
    "op_name",
    [pytest.param(op, marks=pytest.mark.kernels(op)) for op in ("gemm-rs", "gemm-ar", "a2a-gemm")],
)
def test_any_rows_operator_compiles_nothing_for_a_new_row_count(op_name, dtype):
    """One GEMM+ReduceScatter (GEMM+AllReduce, AllToAll+GEMM) for every row count: after a warm-up at two row counts, calls at row
    counts that are not powers of two run the same compiled kernels — 0 ovl compiles (the library's ``compile_key``)
    and 0 Triton JIT compiles (``triton.knobs.runtime.jit_cache_hook``), counted as
    ``packages/bench/gpu/rows_sweep.py`` counts them — each correct within bf16 tolerance. The compiler's crossover (a
    performance call) is lifted so that every call runs the overlapped kernels."""
    import dataclasses

    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    # KEYS' world-2 shapes: their any-row-count operators are among all_keys().
    world, n, k = (2, 512, 256) if op_name == "gemm-rs" else (2, 256, 256)
    g = OneGpuGroup(world)
    w = rand(world, k, n, seed=2, dtype=dtype) / 8
    run = {"gemm-rs": ops.matmul_reduce_scatter, "gemm-ar": ops.matmul_all_reduce, "a2a-gemm": ops.all_to_all_matmul}[op_name]

    def call(M: int, seed: int):
        x = rand(world, M, k, seed=seed, dtype=dtype) / 8
        y = run(x, w, g)
        if op_name == "a2a-gemm":
            return y, _all_to_all_reference(x, w)
        total = sum(x[r].float() @ w[r].float() for r in range(world))
        want = total.view(world, M // world, n) if op_name == "gemm-rs" else total.expand(world, M, n)
        return y, want

    call(1024, 0)  # the first call compiles and loads the operator for every row count
    op = next(o for o in ops.operators() if hasattr(o, "path"))
    assert op.m.reference.operator == op_name
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    lo = op.rows.min
    for i, M in enumerate((lo + 2 * 64, lo + 2 * 300)):  # warm-up: the kernels' first launches
        call(M, 10 + i)
    ops.synchronize(g)
    with counted_compiles() as compiles:
        for i, M in enumerate((lo, lo + 2 * 101, lo + 2 * 517, 3006, 6002)):
            assert op.path(M) == "overlapped", M
            y, want = call(M, 20 + i)
            ops.synchronize(g)
            assert y.shape == want.shape and y.dtype == dtype and rel(y, want) < 0.01, M
    assert compiles == {"ovl": 0, "triton": 0}
    assert len(ops.operators()) == 1


@over_dtypes
@pytest.mark.parametrize("any_rows", [True, False], ids=["any-rows", "per-m"])
@pytest.mark.parametrize(("world", "rows"), [(2, 1024), (4, 1000), (8, 1024)])
@pytest.mark.kernels("gemm-ar")
def test_matmul_all_reduce_matches_torch_and_captures(world, rows, any_rows, dtype, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    # Both operators: the any-row-count one (the plain sequence below its range or the compiler's crossover, which a
    # graph captures as well) and the one compiled for this row count.
    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)
    g = OneGpuGroup(world)

    def want(x, w):
        return sum(x[r].float() @ w[r].float() for r in range(world)).expand(world, rows, 256)

    for step in range(3):
        x, w = rand(world, rows, 256, seed=20 + step, dtype=dtype) / 8, rand(world, 256, 256, seed=30 + step, dtype=dtype) / 8
        y = ops.matmul_all_reduce(x, w, g)
        ops.synchronize(g)
        assert y.shape == (world, rows, 256) and rel(y, want(x, w)) < 0.01, step
    # Its last wait is a kernel on the device: a CUDA graph captures it and replays on fresh inputs.
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        yg = ops.matmul_all_reduce(x, w, g)
    for step in range(4):
        x.copy_(rand(world, rows, 256, seed=60 + step, dtype=dtype) / 8)
        graph.replay()
        ops.synchronize(g)
        assert rel(yg, want(x, w)) < 0.01, step
    del graph


def _all_to_all_reference(x, w):
    """``received @ w[q]`` per rank q, where slab r of ``received`` is slab q of rank r's ``x``."""
    world, rows, k = x.shape
    received = x.view(world, world, rows // world, k).transpose(0, 1).reshape(world, rows, k)
    return torch.stack([received[q].float() @ w[q].float() for q in range(world)])


@over_dtypes
@pytest.mark.kernels("a2a-gemm")
@pytest.mark.parametrize("any_rows", [True, False], ids=["any-rows", "per-m"])
@pytest.mark.parametrize("world", [2, 4, 8])
def test_all_to_all_matmul_matches_torch_and_captures(world, any_rows, dtype, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    # Both operators: the any-row-count one (the plain all-to-all then matmul below its range or the compiler's
    # crossover, which a graph captures as well) and the overlapped one compiled for this row count.
    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)
    g = OneGpuGroup(world)
    x, w = rand(world, 1024, 256, seed=40, dtype=dtype) / 8, rand(world, 256, 256, seed=41, dtype=dtype) / 8
    y = ops.all_to_all_matmul(x, w, g)
    ops.synchronize(g)
    assert y.shape == (world, 1024, 256) and rel(y, _all_to_all_reference(x, w)) < 0.01
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        yg = ops.all_to_all_matmul(x, w, g)
    for step in range(5):
        x.copy_(rand(world, 1024, 256, seed=50 + step, dtype=dtype) / 8)
        graph.replay()
        ops.synchronize(g)
        assert rel(yg, _all_to_all_reference(x, w)) < 0.01, step
    del graph


def _sdpa(q, kv, causal: bool):
    """Dense attention over every rank's positions in rank order (float32), shaped as ``q`` ``[world, s, H, D]``."""
    world, s, heads, d = q.shape
    kv_heads = kv.shape[3]
    qf = q.reshape(world * s, heads, d).transpose(0, 1)[None]  # [1, H, S, D]
    kvf = kv.reshape(world * s, 2, kv_heads, d)
    k = kvf[:, 0].transpose(0, 1).repeat_interleave(heads // kv_heads, 0)[None]
    v = kvf[:, 1].transpose(0, 1).repeat_interleave(heads // kv_heads, 0)[None]
    want = torch.nn.functional.scaled_dot_product_attention(qf.float(), k.float(), v.float(), is_causal=causal)
    return want[0].transpose(0, 1).reshape(world, s, heads, d)


@over_dtypes
@pytest.mark.kernels("ag-attention")
@pytest.mark.parametrize("any_rows", [True, False], ids=["any-length", "per-length"])
@pytest.mark.parametrize(("world", "seq", "heads", "kv_heads", "d", "causal"), ATTENTION)
def test_sequence_parallel_attention_matches_sdpa(world, seq, heads, kv_heads, d, causal, any_rows, dtype, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.errors import UsageError
    from ovl_runtime.groups import OneGpuGroup

    # Both operators: the one for every sequence length (the plain all-gather then SDPA below the compiler's crossover)
    # and the one compiled for this length.
    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)
    g = OneGpuGroup(world)
    s = seq // world
    for step in range(2):
        q, kv = rand(world, s, heads, d, seed=60 + step, dtype=dtype), rand(world, s, 2, kv_heads, d, seed=70 + step, dtype=dtype)
        try:
            o = ops.sequence_parallel_attention(q, kv, g, causal=causal)
        except UsageError as exc:
            if "fixed grid" in str(exc):  # the one-GPU mode cannot hold a fixed grid of waiting programs this large
                pytest.skip(f"one-GPU mode: {exc}")
            raise
        want = _sdpa(q, kv, causal)
        ops.synchronize(g)
        assert o.shape == q.shape and rel(o, want) < 0.02, step


@pytest.mark.kernels("ag-attention")
@pytest.mark.parametrize("world", [2, 8])
def test_the_sequence_parallel_attention_layer_matches_dense_attention(world):
    from ovl_runtime import ops
    from ovl_runtime.errors import UsageError
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.nn import SequenceParallelAttention

    # ATTENTION's S 2048, 8 heads of 128, 2 kv heads, causal shapes, at hidden 1024.
    seq, hidden, heads, kv_heads, d = 2048, 1024, 8, 2, 128
    g = OneGpuGroup(world)
    q, k, v = rand(heads * d, hidden, seed=80) / 32, rand(kv_heads * d, hidden, seed=81) / 32, rand(kv_heads * d, hidden, seed=82) / 32
    o = rand(hidden, heads * d, seed=83) / 32
    layer = SequenceParallelAttention.from_dense(q, k, v, o, heads, g, causal=True)
    x = rand(seq, hidden, seed=84)
    qh = (x @ q.t()).view(seq, heads, d).transpose(0, 1)
    kh = (x @ k.t()).view(seq, kv_heads, d).transpose(0, 1).repeat_interleave(heads // kv_heads, 0)
    vh = (x @ v.t()).view(seq, kv_heads, d).transpose(0, 1).repeat_interleave(heads // kv_heads, 0)
    a = torch.nn.functional.scaled_dot_product_attention(qh.float(), kh.float(), vh.float(), is_causal=True)
    want = a.transpose(0, 1).reshape(seq, heads * d) @ o.float().t()
    with torch.no_grad():
        try:
            y = layer(x.view(world, seq // world, hidden))
        except UsageError as exc:
            if "fixed grid" in str(exc):
                pytest.skip(f"one-GPU mode: {exc}")
            raise
        ops.synchronize(g)
    assert rel(y.reshape(seq, hidden), want) < 0.03


@over_dtypes
@pytest.mark.kernels("ag-attention")
@pytest.mark.parametrize(("world", "seq", "heads", "kv_heads", "d", "causal"), [a for a in ATTENTION if a[0] == 2 and a[1] == 1024])
def test_sequence_parallel_attention_compiles_nothing_for_a_new_length(world, seq, heads, kv_heads, d, causal, dtype):
    """One attention for every sequence length (causal and not): after a warm-up at two lengths, calls at lengths
    that are not powers of two (nor multiples of the blocks) run the same compiled kernel — 0 ovl compiles (the
    library's ``compile_key``) and 0 Triton JIT compiles (``triton.knobs.runtime.jit_cache_hook``) — each matching
    SDPA. The compiler's crossover (a performance call) is lifted so that every call runs the overlapped kernel."""
    import dataclasses

    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(world)

    def call(S: int, seed: int):
        s = S // world
        q, kv = rand(world, s, heads, d, seed=seed, dtype=dtype), rand(world, s, 2, kv_heads, d, seed=seed + 1, dtype=dtype)
        return ops.sequence_parallel_attention(q, kv, g, causal=causal), _sdpa(q, kv, causal)

    call(seq, 0)  # the first call compiles and loads the operator for every length
    op = next(o for o in ops.operators() if hasattr(o, "path"))
    assert op.m.reference.operator == "ag-attention" and op.m.rows is not None
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    lo = op.rows.min
    for i, S in enumerate((lo + 2 * 64, lo + 2 * 300)):  # warm-up: the kernel's first launches
        call(S, 10 + i)
    ops.synchronize(g)
    with counted_compiles() as compiles:
        for i, S in enumerate((lo, lo + 2 * 101, lo + 2 * 517, 3006, 6002)):
            assert op.path(S) == "overlapped", S
            o, want = call(S, 20 + 2 * i)
            ops.synchronize(g)
            assert o.shape == want.shape and o.dtype == dtype and rel(o, want) < 0.02, S
    assert compiles == {"ovl": 0, "triton": 0}
    assert len(ops.operators()) == 1


def test_a_captured_graph_replays_correctly_many_times(monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    # The overlapped operator of this row count: the any-row-count one runs the plain sequence at this small shape.
    monkeypatch.setattr(lib, "ANY_ROWS", False)

    world, m, n, k = 8, 128, 256, 512
    g = OneGpuGroup(world)
    x, w = rand(world, m, k) / 8, rand(world, k, n, seed=3) / 8
    ops.all_gather_matmul(x, w, g)  # the eager call compiles and loads the kernels
    ops.synchronize(g)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = ops.all_gather_matmul(x, w, g)
    for step in range(20):
        x.copy_(rand(world, m, k, seed=100 + step) / 8)
        graph.replay()
        want = torch.stack([x.reshape(world * m, k).float() @ w[r].float() for r in range(world)])
        ops.synchronize(g)
        assert rel(y, want) < 0.01, step
    (op,) = ops.operators()
    with pytest.raises(Exception, match="CUDA graph captured"):
        op.close()
    del graph


# ---- fp8 e4m3 AllGather+GEMM (per-tensor scales, bf16 out) ----
def _fp8_operands(world: int, m: int, n: int, k: int, seed: int):
    """Fresh fp8 ``x`` [world, m, k] and column-major fp8 ``w`` [world, k, n] (as torch._scaled_mm takes it)."""
    x = (rand(world, m, k, seed=seed, dtype=torch.float32) / 2).to(torch.float8_e4m3fn)
    bt = (rand(world, n, k, seed=50 + seed, dtype=torch.float32) / 2).to(torch.float8_e4m3fn)
    return x, bt.transpose(-1, -2)


def _fp8_references(x, w, sa, sb):
    """Every rank's ``torch._scaled_mm(cat(x), w, sa, sb)`` (cuBLAS fp8, bf16 out) and the float32 product of the
    same fp8 values."""
    world, m, k = x.shape
    full = x.reshape(world * m, k)
    scaled = torch.stack([torch._scaled_mm(full, w[r], scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16) for r in range(world)])
    exact = torch.stack([(full.float() @ w[r].float()) * (sa * sb) for r in range(world)])
    return scaled, exact


@pytest.mark.parametrize("any_rows", [True, False], ids=["any-rows", "per-m"])
@pytest.mark.parametrize(("world", "m", "n", "k"), [(2, 512, 256, 512), (4, 256, 256, 512)])
def test_fp8_all_gather_matmul_matches_scaled_mm(world, m, n, k, any_rows, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)
    g = OneGpuGroup(world)
    for step in range(3):  # fresh inputs and scales each call, one compiled operator
        x, w = _fp8_operands(world, m, n, k, seed=step)
        sa = torch.tensor(0.5 + step, device="cuda")
        sb = torch.tensor(1.0 / (1 + step), device="cuda")
        y = ops.all_gather_matmul(x, w, g, scale_a=sa, scale_b=sb)
        scaled, exact = _fp8_references(x, w, sa, sb)
        ops.synchronize(g)
        assert y.shape == (world, world * m, n) and y.dtype == torch.bfloat16
        assert rel(y, exact) < 0.01 and rel(y, scaled) < 0.01, step
    assert len(ops.operators()) == 1


@pytest.mark.parametrize("world", [2, 4])
def test_fp8_eager_own_graph_calls_honour_a_changed_scale(world, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    # The overlapped operator of this row count; eager calls from the second on replay its own graph, whose scale
    # addresses are rewritten per call like every other input's.
    monkeypatch.setattr(lib, "ANY_ROWS", False)
    m, n, k = 1024 // world, 256, 512
    g = OneGpuGroup(world)
    x, w = _fp8_operands(world, m, n, k, seed=7)
    sa, sb = torch.tensor(1.0, device="cuda"), torch.tensor(1.0, device="cuda")
    outs = []
    for step, (a, b) in enumerate([(1.0, 1.0), (2.0, 0.5), (0.25, 3.0), (-1.5, 2.0), (4.0, 4.0)]):
        sa.fill_(a)  # the same tensors, new values in place
        sb.fill_(b)
        y = ops.all_gather_matmul(x, w, g, scale_a=sa, scale_b=sb)
        _scaled, exact = _fp8_references(x, w, sa, sb)
        ops.synchronize(g)
        assert rel(y, exact) < 0.01, (step, a, b)
        outs.append(y)
    fresh = ops.all_gather_matmul(x, w, g, scale_a=torch.tensor(0.125, device="cuda"), scale_b=torch.tensor(2.0, device="cuda"))
    ops.synchronize(g)
    assert rel(fresh, outs[0] * 0.25) < 0.01  # new scale tensors (new addresses): their values
    (op,) = ops.operators()
    assert op.own is not None and op.direct_reason is None  # the calls after the second replayed the own graph


def test_fp8_a_captured_graph_reads_the_scales_at_every_replay(monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    monkeypatch.setattr(lib, "ANY_ROWS", False)
    world, m, n, k = 2, 512, 256, 512
    g = OneGpuGroup(world)
    x, w = _fp8_operands(world, m, n, k, seed=3)
    sa, sb = torch.tensor(1.0, device="cuda"), torch.tensor(0.5, device="cuda")
    ops.all_gather_matmul(x, w, g, scale_a=sa, scale_b=sb)  # the eager call compiles and loads the kernels
    ops.synchronize(g)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = ops.all_gather_matmul(x, w, g, scale_a=sa, scale_b=sb)
    for step in range(5):
        sb.fill_(0.5 * (step + 1))
        graph.replay()
        _scaled, exact = _fp8_references(x, w, sa, sb)
        ops.synchronize(g)
        assert rel(y, exact) < 0.01, step
    del graph


def test_eager_calls_after_replays_wait_for_their_own_epoch(monkeypatch):
    """A replay advances the device's epoch word, not the host's count: eager calls after replays (a model that
    prefills eagerly and decodes from a graph) still signal and wait for the same epoch."""
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    monkeypatch.setattr(lib, "ANY_ROWS", False)  # the overlapped operator of this row count

    world, m, n, k = 8, 128, 256, 512
    g = OneGpuGroup(world)
    x, w = rand(world, m, k, seed=60) / 8, rand(world, k, n, seed=61) / 8

    def want():
        return torch.stack([x.reshape(world * m, k).float() @ w[r].float() for r in range(world)])

    ops.all_gather_matmul(x, w, g)
    ops.synchronize(g)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        yg = ops.all_gather_matmul(x, w, g)
    for step in range(6):
        x.copy_(rand(world, m, k, seed=70 + step) / 8)
        if step % 3 == 2:
            y = ops.all_gather_matmul(x, w, g)
        else:
            graph.replay()
            y = yg
        ops.synchronize(g)  # raises WaitTimeout where a wait gave up
        assert rel(y, want()) < 0.01, step
    del graph


def test_the_first_call_cannot_be_captured():
    from ovl_runtime import ops
    from ovl_runtime.errors import UsageError
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(2)
    x, w = rand(2, 128, 512), rand(2, 512, 256)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(UsageError, match="call the operator once before capturing"):
        with torch.cuda.graph(graph):
            ops.all_gather_matmul(x, w, g)


def test_tp_mlp_matches_the_dense_mlp_and_captures():
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.nn import TensorParallelMLP

    world, seq, hidden, inter = 8, 1024, 1024, 4096
    g = OneGpuGroup(world)
    gate, up, down = rand(inter, hidden, seed=4) / 32, rand(inter, hidden, seed=5) / 32, rand(hidden, inter, seed=6) / 64
    mlp = TensorParallelMLP.from_dense(gate, up, down, g)
    x = rand(seq, hidden, seed=7)
    want = (torch.nn.functional.silu(x @ gate.t()) * (x @ up.t())) @ down.t()
    xs = x.view(world, seq // world, hidden).contiguous()
    with torch.no_grad():
        y = mlp(xs)
        ops.synchronize(g)
        assert rel(y.reshape(seq, hidden), want) < 0.02
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            yg = mlp(xs)
        for step in range(5):
            x2 = rand(seq, hidden, seed=50 + step)
            xs.copy_(x2.view(world, seq // world, hidden))
            graph.replay()
            want2 = (torch.nn.functional.silu(x2 @ gate.t()) * (x2 @ up.t())) @ down.t()
            ops.synchronize(g)
            assert rel(yg.reshape(seq, hidden), want2) < 0.02
    del graph


@pytest.mark.parametrize("world", [2, 8])
def test_the_tp_block_matches_the_plain_pytorch_block(world):
    from ovl_runtime.groups import OneGpuGroup

    ex = _example()
    err = ex.check(world, OneGpuGroup(world), ex.Config(), steps=2)
    assert err < 0.03


def test_a_wait_never_notified_times_out_naming_it_and_the_gpu_stays_usable(tmp_path, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime._manifest.parse import load_manifest
    from ovl_runtime._runner.bound import BoundOperator
    from ovl_runtime.errors import WaitTimeout
    from ovl_runtime.groups import OneGpuGroup

    key = lib.KernelKey("ag-gemm", 2, 256, 256, 512)
    src = lib.ensure_compiled(key)
    broken = tmp_path / key.dirname
    shutil.copytree(src.parent, broken)
    doc = json.loads((broken / "manifest.json").read_text())
    dropped = doc["hostOps"][1]["streams"][0]["ops"].pop()  # rank 1's last copy never happens
    doc["waitTimeoutNs"] = 200_000_000
    (broken / "manifest.json").write_text(json.dumps(doc))
    g = OneGpuGroup(2)
    op = BoundOperator(load_manifest(broken / "manifest.json"), g)
    x, w, out = rand(2, 128, 512), rand(2, 512, 256), torch.empty(2, 256, 256, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(WaitTimeout) as exc:
        op.run({"A": x, "B": w}, out)
        op.check()
    assert exc.value.rank == dropped["signal"]["rank"] and exc.value.slot == dropped["signal"]["slot"]
    op.close()
    y = ops.all_gather_matmul(x, w, g)  # the GPU is usable: a sound operator runs and is right
    ops.synchronize(g)
    assert rel(y, torch.stack([x.reshape(256, 512).float() @ w[r].float() for r in range(2)])) < 0.01


if __name__ == "__main__":
    prepare_main("test_torch_api_gpu.py", all_keys)
