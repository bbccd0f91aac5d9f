"""The torch API without a GPU: kernel library, groups, input checks, tracing (fake tensors).

The GPU half (numerics, CUDA graphs, the TP block) is ``tests_gpu/test_torch_api_gpu.py``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ovl_runtime import ops  # noqa: E402
from ovl_runtime._compiler import bundled  # noqa: E402
from ovl_runtime._kernels import library as lib  # noqa: E402
from ovl_runtime.errors import ManifestError, UsageError  # noqa: E402
from ovl_runtime.groups import OneGpuGroup, resolve_group  # noqa: E402

CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
needs_cli = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")


def _no_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No compiler anywhere: no OVL_CLI, no bundle in this install (a built one is hidden), no `ovl` on the PATH."""
    monkeypatch.delenv("OVL_CLI", raising=False)
    monkeypatch.setattr(bundled, "BUNDLE", tmp_path / "no-bundle" / "ovl.mjs")
    monkeypatch.setenv("PATH", str(tmp_path))


def test_keys_name_their_directory_and_refuse_bad_shapes():
    k = lib.KernelKey("ag-gemm", 8, 1024, 256, 512)
    assert k.dirname == "ag-gemm-w8-m1024-n256-k512-bf16"
    assert lib.KernelKey("gemm-rs", 2, 1024, 64, 64).dirname == "gemm-rs-sm-w2-m1024-n64-k64-bf16"
    assert k.cli_args(Path("/o"))[:2] == ["emit", "ag-gemm"] and "--split" in k.cli_args(Path("/o"))
    # A ReduceScatter slab of one 128-row block cannot be cut in two chunks on block boundaries.
    assert lib.KernelKey("gemm-rs", 8, 1024, 64, 64).split == 1 and lib.KernelKey("gemm-rs", 2, 1024, 64, 64).split == 2
    for bad in [("all-to-all", 2, 8, 8, 8), ("ag-gemm", 0, 8, 8, 8), ("ag-gemm", 3, 8, 8, 8), ("ag-gemm", 2, 8, -1, 8)]:
        with pytest.raises(UsageError):
            lib.KernelKey(*bad)
    with pytest.raises(UsageError, match="bf16"):
        lib.KernelKey("ag-gemm", 2, 8, 8, 8, dtype="fp8")


def test_a_target_names_the_tuned_table_and_the_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("OVL_TARGET", raising=False)
    assert lib.KernelKey("ag-gemm", 2, 256, 128, 64).target == ""
    monkeypatch.setenv("OVL_TARGET", "h100")
    k = lib.KernelKey("ag-gemm", 2, 256, 128, 64)
    assert k.target == "h100" and k.dirname == "ag-gemm-w2-m256-n128-k64-bf16-h100"
    args = k.cli_args(Path("/o"))
    assert args[args.index("--target") + 1] == "h100"
    # Operators no tuned table decides keep the compiler's default whatever OVL_TARGET says.
    assert lib.KernelKey("ag-attention", 2, 512, 256, 256, heads=4).target == ""
    assert lib.KernelKey("gemm-rs", 2, 1024, 64, 64, target="h200").dirname.endswith("-bf16-h200")
    # ag-moe's tile is tuned too (with its routing): the target travels to the compiler.
    moe = lib.KernelKey("ag-moe", 2, 512, 64, 256, experts=4, topk=2)
    assert moe.target == "h100" and moe.cli_args(Path("/o"))[moe.cli_args(Path("/o")).index("--target") + 1] == "h100"
    for bad in [dict(target="a100"), dict(op="moe-rs", experts=4, topk=1, target="h100")]:
        with pytest.raises(UsageError, match="target"):
            lib.KernelKey(**{"op": "ag-gemm", "world": 2, "m": 256, "n": 128, "k": 64, **bad})
    monkeypatch.setenv("OVL_TARGET", "v100")
    with pytest.raises(UsageError, match="OVL_TARGET"):
        lib.KernelKey("ag-gemm", 2, 256, 128, 64)
    # auto: the current GPU's table (none on this machine: the compiler's default).
    monkeypatch.setenv("OVL_TARGET", "auto")
    monkeypatch.setattr(lib, "device_target", lambda: "h100")
    assert lib.KernelKey("a2a-gemm", 2, 256, 128, 64).target == "h100"
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    _no_compiler(tmp_path, monkeypatch)
    with pytest.raises(lib.KernelNotCompiled, match="--target h100 --per-m --into"):
        lib.manifest_for(lib.KernelKey("ag-gemm", 2, 256, 128, 64))


@needs_cli
def test_a_targeted_key_compiles_with_that_gpus_table(tmp_path, monkeypatch):
    # MLP-1's AllGather+GEMM at world 4 (N 2752): the H100 table gives it the stream-K body, the H200 table the flattened one.
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.setenv("OVL_CLI", f"node {CLI}")
    entries = {}
    for target in ("h100", "h200"):
        key = lib.KernelKey("ag-gemm", 4, 8192, 2752, 4096, target=target)
        m = lib.manifest_for(key)
        entries[target] = m.kernels[0].entry
        assert lib.find(key) == tmp_path / "cache" / key.dirname / "manifest.json"
    assert entries == {"h100": "gemm_tma_persistent_streamk", "h200": "gemm_tma_persistent_flat"}


def test_search_path_and_a_missing_kernel_without_a_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("OVL_KERNELS", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    _no_compiler(tmp_path, monkeypatch)
    assert lib.search_path() == [tmp_path / "a", tmp_path / "b", tmp_path / "cache"]
    key = lib.KernelKey("ag-gemm", 2, 256, 128, 64)
    assert lib.find(key) is None
    with pytest.raises(lib.KernelNotCompiled, match="python -m ovl_runtime kernels ag-gemm --world 2 --m 256 --n 128 --k 64"):
        lib.manifest_for(key)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@needs_cli
def test_compiles_on_demand_into_the_cache_and_checks_what_it_finds(tmp_path, monkeypatch):
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.setenv("OVL_CLI", f"node {CLI}")
    key = lib.KernelKey("gemm-rs", 2, 512, 128, 64)
    m = lib.manifest_for(key)
    assert (m.reference.operator, m.world, m.reference.M, m.reference.N, m.reference.K) == ("gemm-rs", 2, 512, 128, 64)
    assert lib.find(key) == tmp_path / "cache" / key.dirname / "manifest.json"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [key.dirname]  # no temporary left behind
    # A directory holding another operator under this key's name is refused, not run.
    wrong = lib.KernelKey("gemm-rs", 2, 512, 128, 128)
    shutil.copytree(tmp_path / "cache" / key.dirname, tmp_path / "cache" / wrong.dirname)
    with pytest.raises(ManifestError, match="K 64 .wanted 128."):
        lib.manifest_for(wrong)


def test_groups_resolve_by_object_and_name():
    g = OneGpuGroup(4, name="test-four")
    assert resolve_group("test-four") is g and resolve_group(g) is g and g.stacked
    with pytest.raises(UsageError, match="exists already"):
        OneGpuGroup(2, name="test-four")
    with pytest.raises(UsageError):
        OneGpuGroup(0)
    with pytest.raises(UsageError, match="no group named"):
        resolve_group("no-such-group")
    with pytest.raises(UsageError, match="not int"):
        resolve_group(3)


@pytest.mark.parametrize(
    ("x", "w", "message"),
    [
        (torch.zeros(2, 8, 16, dtype=torch.float32), torch.zeros(2, 16, 8, dtype=torch.bfloat16), "float32"),
        (torch.zeros(2, 8, 16, dtype=torch.bfloat16), torch.zeros(2, 16, 8, dtype=torch.bfloat16), "on cpu"),
        (torch.zeros(8, 16, dtype=torch.bfloat16), torch.zeros(2, 16, 8, dtype=torch.bfloat16), "3 dimensions"),
        (torch.zeros(3, 8, 16, dtype=torch.bfloat16), torch.zeros(2, 16, 8, dtype=torch.bfloat16), "carry 2 ranks"),
        (torch.zeros(2, 16, 8, dtype=torch.bfloat16).transpose(1, 2), torch.zeros(2, 16, 8, dtype=torch.bfloat16), "contiguous|on cpu"),
    ],
)
def test_bad_inputs_are_refused_before_any_launch(x, w, message):
    g = OneGpuGroup(2)
    with pytest.raises(UsageError, match=message):
        ops.all_gather_matmul(x, w, g)
    assert ops.operators() == []


@pytest.mark.parametrize("op", ["all_gather_matmul", "matmul_reduce_scatter", "all_to_all_matmul"])
def test_a_call_of_no_rows_is_refused_before_anything_is_compiled(op):
    from ovl_runtime.groups import EmulatedGroup

    g = EmulatedGroup(2)
    x, w = torch.zeros(2, 0, 64, dtype=torch.bfloat16), torch.randn(2, 64, 32, dtype=torch.bfloat16)
    with pytest.raises(UsageError, match="m must be a positive integer, got 0"):
        getattr(ops, op)(x, w, g)
    assert ops.operators() == []


def test_the_ops_trace_as_single_torch_library_ops():
    from torch.fx.experimental.proxy_tensor import make_fx

    g = OneGpuGroup(4)

    def layer(x, w1, w2):
        h = ops.all_gather_matmul(x, w1, g)
        return ops.matmul_reduce_scatter(torch.nn.functional.silu(h), w2, g)

    x, w1, w2 = torch.zeros(4, 32, 64), torch.zeros(4, 64, 16), torch.zeros(4, 16, 64)
    gm = make_fx(layer, tracing_mode="fake")(x, w1, w2)
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert "ovl.all_gather_matmul.default" in targets and "ovl.matmul_reduce_scatter.default" in targets
    out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    assert tuple(out.meta["val"].shape) == (4, 32, 64)  # [world, rows per rank, N]


def test_gemm_ar_a2a_and_attention_keys_name_their_directory_and_cli_arguments():
    ar = lib.KernelKey("gemm-ar", 2, 1024, 256, 128)
    assert ar.dirname == "gemm-ar-sm-w2-m1024-n256-k128-bf16" and ar.backend == "sm" and ar.split == 2
    assert lib.KernelKey("gemm-ar", 8, 1024, 256, 128).split == 1  # 128 rows a rank: one block
    a2a = lib.KernelKey("a2a-gemm", 4, 512, 256, 128)
    assert a2a.dirname == "a2a-gemm-w4-m512-n256-k128-bf16" and a2a.cli_args(Path("/o"))[:2] == ["emit", "a2a-gemm"]
    att = lib.KernelKey("ag-attention", 2, 512, 4 * 64, 2 * 2 * 64, heads=4, causal=True)
    assert att.dirname == "ag-attention-w2-m512-n256-k256-h4-causal-bf16"
    args = att.cli_args(Path("/o"))
    assert args[:2] == ["emit", "ag-attention"] and "--causal" in args
    assert args[args.index("--seq") : args.index("--seq") + 8] == ["--seq", "512", "--heads", "4", "--kv-heads", "2", "--head-dim", "64"]
    assert "--causal" not in lib.KernelKey("ag-attention", 2, 512, 256, 512, heads=4).cli_args(Path("/o"))
    for bad in [
        dict(op="ag-attention", world=2, m=512, n=256, k=256),  # no heads
        dict(op="ag-attention", world=2, m=512, n=250, k=256, heads=4),  # N not heads x D
        dict(op="ag-attention", world=2, m=512, n=256, k=200, heads=4),  # K not 2 x Hkv x D
        dict(op="ag-attention", world=2, m=512, n=256, k=3 * 128, heads=4),  # 3 kv heads for 4 query heads
        dict(op="ag-attention", world=2, m=512, n=256, k=256, heads=4, causal=1),
        dict(op="gemm-ar", world=2, m=512, n=256, k=256, heads=4),
        dict(op="a2a-gemm", world=2, m=512, n=256, k=256, causal=True),
    ]:
        with pytest.raises(UsageError):
            lib.KernelKey(**bad)


def test_attention_keys_accept_exactly_the_head_layouts_that_divide():
    import random

    rnd = random.Random(7)
    for _ in range(300):
        heads, kv, d = rnd.randint(1, 16), rnd.randint(1, 16), rnd.choice([16, 32, 64, 128])
        ok = heads % kv == 0
        try:
            key = lib.KernelKey("ag-attention", 2, 256, heads * d, 2 * kv * d, heads=heads)
        except UsageError:
            assert not ok, (heads, kv, d)
        else:
            assert ok, (heads, kv, d)
            args = key.cli_args(Path("/o"))
            assert args[args.index("--kv-heads") + 1] == str(kv) and args[args.index("--head-dim") + 1] == str(d)


@needs_cli
@pytest.mark.parametrize(
    "key",
    [
        lib.KernelKey("gemm-ar", 2, 512, 128, 64),
        lib.KernelKey("a2a-gemm", 2, 256, 128, 64),
        lib.KernelKey("ag-attention", 2, 256, 4 * 32, 2 * 2 * 32, heads=4, causal=True),
    ],
    ids=lambda k: k.op,
)
def test_new_operators_compile_on_demand_and_a_misnamed_directory_is_refused(key, tmp_path, monkeypatch):
    from ovl_runtime._runner.bound import capture_refusal, refusal

    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.setenv("OVL_CLI", f"node {CLI}")
    m = lib.manifest_for(key)
    assert (m.reference.operator, m.world, m.reference.M, m.reference.N, m.reference.K) == (key.op, 2, key.m, key.n, key.k)
    assert refusal(m) is None
    # Each operator's launch ends with a device-side wait (GEMM+AllReduce's slot-wait kernel for the
    # rows it receives), so a CUDA graph can capture every one.
    assert capture_refusal(m) is None
    if key.op == "ag-attention":
        wrong = lib.KernelKey("ag-attention", 2, 256, 128, 128, heads=4, causal=False)
        shutil.copytree(tmp_path / "cache" / key.dirname, tmp_path / "cache" / wrong.dirname)
        with pytest.raises(ManifestError, match="causal True .wanted False."):
            lib.manifest_for(wrong)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda g: ops.all_to_all_matmul(torch.zeros(2, 9, 16, dtype=torch.bfloat16), torch.zeros(2, 16, 8, dtype=torch.bfloat16), g),
            "9 rows do not split",
        ),
        (lambda g: ops.all_to_all_matmul(torch.zeros(2, 8, 16), torch.zeros(2, 16, 8), g), "float32"),
        (
            lambda g: ops.matmul_all_reduce(torch.zeros(2, 8, 16, dtype=torch.bfloat16), torch.zeros(2, 16, 8, dtype=torch.bfloat16), g),
            "on cpu",
        ),
        (
            lambda g: ops.matmul_all_reduce(torch.zeros(8, 16, dtype=torch.bfloat16), torch.zeros(2, 16, 8, dtype=torch.bfloat16), g),
            "3 dimensions",
        ),
        (lambda g: ops.sequence_parallel_attention(torch.zeros(2, 8, 6, 16), torch.zeros(2, 8, 2, 4, 16), g), "multiple of kv_heads"),
        (
            lambda g: ops.sequence_parallel_attention(torch.zeros(2, 8, 4, 16), torch.zeros(2, 4, 2, 4, 16), g),
            "kv must be \\[8, 2, kv_heads, 16\\]",
        ),
        (lambda g: ops.sequence_parallel_attention(torch.zeros(2, 8, 4, 16), torch.zeros(2, 8, 2, 2, 32), g), "kv must be"),
        (lambda g: ops.sequence_parallel_attention(torch.zeros(2, 8, 4, 16), torch.zeros(2, 8, 2, 2, 16), g, causal=1), "True or False"),
        (lambda g: ops.sequence_parallel_attention(torch.zeros(8, 4, 16), torch.zeros(2, 8, 2, 2, 16), g), "4 dimensions"),
        (lambda g: ops.sequence_parallel_attention(torch.zeros(3, 8, 4, 16), torch.zeros(2, 8, 2, 2, 16), g), "carry 2 ranks"),
        (lambda g: ops.sequence_parallel_attention(torch.zeros(2, 8, 4, 16), torch.zeros(2, 8, 2, 2, 16), g), "float32"),
        (
            lambda g: ops.sequence_parallel_attention(
                torch.zeros(2, 8, 4, 16, dtype=torch.bfloat16), torch.zeros(2, 8, 2, 2, 16, dtype=torch.bfloat16), g
            ),
            "on cpu",
        ),
    ],
)
def test_bad_inputs_of_the_new_operators_are_refused_before_any_launch(call, message):
    with pytest.raises(UsageError, match=message):
        call(OneGpuGroup(2))
    assert ops.operators() == []


def test_the_new_ops_trace_as_single_torch_library_ops():
    from torch.fx.experimental.proxy_tensor import make_fx

    g = OneGpuGroup(4)

    def block(x, w1, w2, q, kv):
        a = ops.sequence_parallel_attention(q, kv, g, causal=True)
        h = ops.all_to_all_matmul(x, w1, g)
        return a, ops.matmul_all_reduce(torch.relu(h), w2, g)

    args = (torch.zeros(4, 32, 64), torch.zeros(4, 64, 16), torch.zeros(4, 16, 48), torch.zeros(4, 8, 4, 16), torch.zeros(4, 8, 2, 2, 16))
    gm = make_fx(block, tracing_mode="fake")(*args)
    nodes = {str(n.target): n for n in gm.graph.nodes if n.op == "call_function"}
    for name in ("ovl.sequence_parallel_attention.default", "ovl.all_to_all_matmul.default", "ovl.matmul_all_reduce.default"):
        assert name in nodes, sorted(nodes)
    assert nodes["ovl.sequence_parallel_attention.default"].args[3] is True
    a, y = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    assert tuple(a.meta["val"].shape) == (4, 8, 4, 16) and tuple(y.meta["val"].shape) == (4, 32, 48)


def test_the_sequence_parallel_attention_layer_shards_dense_weights_and_traces():
    from torch.fx.experimental.proxy_tensor import make_fx

    from ovl_runtime.nn import SequenceParallelAttention

    g = OneGpuGroup(2)
    gen = torch.Generator().manual_seed(3)
    q, k, v, o = (torch.randn(*s, generator=gen) for s in [(64, 32), (32, 32), (32, 32), (32, 64)])
    layer = SequenceParallelAttention.from_dense(q, k, v, o, heads=4, group=g, causal=True)
    assert (layer.heads, layer.kv_heads, layer.head_dim, layer.causal) == (4, 2, 16, True)
    x = torch.randn(2, 8, 32, generator=gen)
    qx, kvx = layer.project(x)
    assert torch.allclose(qx.flatten(-2), x @ q.t()) and torch.allclose(kvx[..., 0, :, :].flatten(-2), x @ k.t())
    assert torch.allclose(kvx[..., 1, :, :].flatten(-2), x @ v.t()) and torch.equal(layer.wo, o.t())
    params = {n: p.detach() for n, p in layer.named_parameters()}
    gm = make_fx(lambda p, x: torch.func.functional_call(layer, p, (x,)), tracing_mode="fake")(params, x)
    assert "ovl.sequence_parallel_attention.default" in [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert tuple([n for n in gm.graph.nodes if n.op == "output"][0].args[0][0].meta["val"].shape) == (2, 8, 32)
    with pytest.raises(UsageError, match="multiple of kv_heads"):
        SequenceParallelAttention(32, 4, 3, 16, g, device="cpu")
    with pytest.raises(UsageError, match="not 4 heads"):
        SequenceParallelAttention.from_dense(torch.zeros(30, 32), k, v, o, heads=4, group=g)
    with pytest.raises(UsageError, match="Hkv"):
        SequenceParallelAttention.from_dense(q, k, v[:16], o, heads=4, group=g)


@needs_cli
def test_the_kernels_command_builds_an_attention_library_entry(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv("OVL_CLI", f"node {CLI}")
    cmd = [sys.executable, "-m", "ovl_runtime", "kernels", "ag-attention", "--world", "2", "--m", "256", "--n", "128", "--k", "128"]
    done = subprocess.run([*cmd, "--heads", "4", "--causal", "--into", str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    # The key the torch API binds: the operator for every sequence length (``--per-m``: this length's alone).
    key = lib.call_key("ag-attention", 2, 256, 128, 128, heads=4, causal=True)
    assert key.rows and done.stdout.strip() == str(tmp_path / key.dirname / "manifest.json")
    refused = subprocess.run([*cmd, "--into", str(tmp_path)], capture_output=True, text=True, check=False)  # no --heads
    assert refused.returncode != 0 and "heads" in refused.stderr + refused.stdout


def test_a_missing_attention_kernel_names_the_command_with_its_heads(tmp_path, monkeypatch):
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    _no_compiler(tmp_path, monkeypatch)
    key = lib.KernelKey("ag-attention", 2, 256, 128, 128, heads=4, causal=True)
    with pytest.raises(
        lib.KernelNotCompiled, match="kernels ag-attention --world 2 --m 256 --n 128 --k 128 --heads 4 --causal --per-m --into"
    ):
        lib.manifest_for(key)


def test_every_operator_is_offered_by_ops_in_either_import_order():
    import subprocess
    import sys

    code = (
        "import {first}; import ovl_runtime.ops as o; import ovl_runtime.operators.mlp.api as m; import ovl_runtime.operators.moe_rs.api as mo\n"
        "assert o.tp_mlp is m.tp_mlp and o.all_gather_matmul_silu_mul is m.all_gather_matmul_silu_mul\n"
        "assert o.moe_grouped_matmul_reduce_scatter is mo.moe_grouped_matmul_reduce_scatter\n"
        "assert all(callable(getattr(o, n)) for n in o.__all__)\n"
        "try:\n    o.no_such_operator\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit('no AttributeError')\n"
    )
    for first in ("ovl_runtime.ops", "ovl_runtime.operators.moe_rs.api", "ovl_runtime.operators.mlp.api"):
        r = subprocess.run([sys.executable, "-c", code.format(first=first)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


# ---- fp16 beside bf16 ----
def test_fp16_keys_name_their_directory_and_compile_with_dtype(tmp_path, monkeypatch):
    monkeypatch.delenv("OVL_TARGET", raising=False)
    k = lib.KernelKey("ag-gemm", 2, 256, 128, 64, "fp16")
    assert k.dirname == "ag-gemm-w2-m256-n128-k64-fp16"
    for key in (
        k,
        lib.KernelKey("ag-attention", 2, 512, 256, 256, "fp16", heads=4),
        lib.KernelKey("moe-rs", 2, 64, 32, 32, "fp16", experts=4, topk=2),
    ):
        args = key.cli_args(Path("/o"))
        assert args[args.index("--dtype") + 1] == "fp16", key.op
    bf16 = lib.KernelKey("gemm-rs", 2, 1024, 64, 64).cli_args(Path("/o"))
    assert bf16[bf16.index("--dtype") + 1] == "bf16"
    for bad in ("fp32", "fp8", "float16", "fp16 --out /etc"):
        with pytest.raises(UsageError, match="compiled for bf16 or fp16"):
            lib.KernelKey("ag-gemm", 2, 256, 128, 64, bad)
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OVL_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(lib.KernelNotCompiled, match="kernels ag-gemm --world 2 --m 256 --n 128 --k 64 --dtype fp16 --per-m --into"):
        lib.manifest_for(k)


F16, BF16 = torch.float16, torch.bfloat16


def _mixed(shape_x, shape_w, x_dtype=F16, w_dtype=BF16):
    return torch.zeros(*shape_x, dtype=x_dtype), torch.zeros(*shape_w, dtype=w_dtype)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda g: ops.all_gather_matmul(*_mixed((2, 8, 16), (2, 16, 8)), g), "x is torch.float16 but w is torch.bfloat16"),
        (lambda g: ops.matmul_reduce_scatter(*_mixed((2, 8, 16), (2, 16, 8)), g), "x is torch.float16 but w is torch.bfloat16"),
        (lambda g: ops.matmul_all_reduce(*_mixed((2, 8, 16), (2, 16, 8), BF16, F16), g), "x is torch.bfloat16 but w is torch.float16"),
        (lambda g: ops.all_to_all_matmul(*_mixed((2, 8, 16), (2, 16, 8)), g), "convert w with w.to\\(torch.float16\\)"),
        (lambda g: ops.all_gather_matmul_silu_mul(*_mixed((2, 8, 16), (2, 16, 8)), g), "x is torch.float16 but w is torch.bfloat16"),
        (
            lambda g: ops.tp_mlp(torch.zeros(2, 8, 16, dtype=F16), torch.zeros(2, 16, 8, dtype=F16), torch.zeros(2, 4, 16, dtype=BF16), g),
            "x is torch.float16 but w_down is torch.bfloat16",
        ),
        (
            lambda g: ops.sequence_parallel_attention(torch.zeros(2, 8, 4, 16, dtype=F16), torch.zeros(2, 8, 2, 2, 16, dtype=BF16), g),
            "q is torch.float16 but kv is torch.bfloat16",
        ),
        (
            lambda g: ops.moe_all_gather_grouped_matmul(
                torch.zeros(2, 8, 16, dtype=F16), torch.zeros(2, 16, 2, dtype=torch.int32), torch.zeros(2, 4, 16, 8, dtype=BF16), g
            ),
            "x is torch.float16 but w is torch.bfloat16",
        ),
        (
            lambda g: ops.moe_grouped_matmul_reduce_scatter(
                torch.zeros(2, 32, 8, dtype=BF16),
                torch.zeros(2, 16, 2, dtype=torch.int32),
                torch.zeros(2, 16, 2),
                torch.zeros(2, 4, 8, 16, dtype=F16),
                g,
            ),
            "h is torch.bfloat16 but w is torch.float16",
        ),
        # Unsupported element types name the supported ones.
        (
            lambda g: ops.all_gather_matmul(*_mixed((2, 8, 16), (2, 16, 8), torch.float32, torch.float32), g),
            "bfloat16 \\(bf16\\) or torch.float16 \\(fp16\\)",
        ),
        (
            lambda g: ops.matmul_reduce_scatter(*_mixed((2, 8, 16), (2, 16, 8), torch.float8_e4m3fn, torch.float8_e4m3fn), g),
            "x is torch.float8_e4m3fn; the operator takes torch.bfloat16 \\(bf16\\) or torch.float16 \\(fp16\\)",
        ),
        (lambda g: ops.all_gather_matmul(*_mixed((2, 8, 16), (2, 16, 8), F16, torch.float32), g), "w is torch.float32; the operator takes"),
    ],
)
def test_mixed_and_unsupported_dtypes_are_refused_before_anything_else(call, message):
    # CPU tensors: the element types are checked before the device, the shapes and the kernel (no launch, no key).
    with pytest.raises(UsageError, match=message):
        call(OneGpuGroup(2))
    assert ops.operators() == []


def test_a_checked_call_is_checked_again_when_a_tensors_dtype_changes():
    from ovl_runtime._torch_api.registry import checked_call

    class Bound:
        closed = False

    built: list[tuple[torch.dtype, ...]] = []

    def build(*tensors):
        def go():
            built.append(tuple(t.dtype for t in tensors))
            return Bound(), None

        return go

    x, w = torch.zeros(8, 16, dtype=F16), torch.zeros(16, 8, dtype=F16)
    sig = ("test-op", "g", x.shape, w.shape, x.dtype, x.device)
    checked_call(sig, (x, w), build(x, w))
    checked_call(sig, (x, w), build(x, w))  # seen: no checks again
    w2 = w.to(BF16)
    checked_call(sig, (x, w2), build(x, w2))  # only w changed dtype: built (checked) anew
    assert built == [(F16, F16), (F16, BF16)]


@needs_cli
def test_the_kernels_command_and_on_demand_compiles_build_fp16(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv("OVL_CLI", f"node {CLI}")
    monkeypatch.delenv("OVL_TARGET", raising=False)
    # --per-m: the operator of this row count (without it, the one for every row count the torch API binds).
    cmd = [sys.executable, "-m", "ovl_runtime", "kernels", "gemm-rs", "--world", "2", "--m", "512", "--n", "128", "--k", "64", "--per-m"]
    done = subprocess.run([*cmd, "--dtype", "fp16", "--into", str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    key = lib.KernelKey("gemm-rs", 2, 512, 128, 64, "fp16")
    assert done.stdout.strip() == str(tmp_path / key.dirname / "manifest.json")
    m = load_manifest_checked(key, tmp_path)
    assert m.dtype == "fp16" and m.reference.tolerance == 5e-3
    assert {b.dtype for b in m.buffers if b.name in (*m.reference.inputs.values(), m.reference.output)} == {"fp16"}
    refused = subprocess.run([*cmd, "--dtype", "fp32", "--into", str(tmp_path)], capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "bf16" in refused.stderr and "fp16" in refused.stderr
    # A bf16 directory misplaced under the fp16 key's name is refused, not run.
    bf16 = lib.KernelKey("gemm-rs", 2, 512, 128, 64)
    lib.ensure_compiled(bf16, tmp_path)
    shutil.rmtree(tmp_path / key.dirname)
    shutil.copytree(tmp_path / bf16.dirname, tmp_path / key.dirname)
    with pytest.raises(ManifestError, match="dtype 'bf16' .wanted 'fp16'."):
        load_manifest_checked(key, tmp_path)


def load_manifest_checked(key, root):
    from ovl_runtime import load_manifest

    path = root / key.dirname / "manifest.json"
    m = load_manifest(path)
    lib.check_manifest(m, key, path)
    return m
