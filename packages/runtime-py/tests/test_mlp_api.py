"""The fused MLP's torch API without a GPU: its kernel key, compile on demand, input checks and
tracing (fake tensors). The GPU half is ``tests_gpu/test_mlp_gpu.py``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ovl_runtime import ops  # noqa: E402
from ovl_runtime._kernels import library as lib  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.groups import OneGpuGroup  # noqa: E402
from ovl_runtime.ops import all_gather_matmul_silu_mul, tp_mlp  # noqa: E402

CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
needs_cli = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")


def test_the_fused_first_stage_has_a_key_of_its_own():
    k = lib.KernelKey("ag-gemm-silu", 8, 1024, 256, 512)
    assert k.dirname == "ag-gemm-silu-w8-m1024-n256-k512-bf16"
    assert k.backend == "copy-engine"
    assert k.cli_args(Path("/o"))[:2] == ["emit", "ag-gemm-silu"]


@needs_cli
def test_the_fused_first_stage_compiles_on_demand(tmp_path, monkeypatch):
    from ovl_runtime._runner.bound import capture_refusal, refusal

    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.setenv("OVL_CLI", f"node {CLI}")
    key = lib.KernelKey("ag-gemm-silu", 2, 512, 128, 64)
    m = lib.manifest_for(key)
    ref = m.reference
    assert (ref.operator, m.world, ref.M, ref.N, ref.K) == ("ag-gemm-silu", 2, 512, 128, 64)
    assert m.buffer(ref.inputs["B"]).shape == (64, 256)
    assert refusal(m) is None and capture_refusal(m) is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda g: tp_mlp(torch.zeros(2, 8, 16), torch.zeros(2, 16, 8), torch.zeros(2, 4, 16), g), "float32"),
        (
            lambda g: all_gather_matmul_silu_mul(
                torch.zeros(2, 8, 16, dtype=torch.bfloat16), torch.zeros(2, 16, 7, dtype=torch.bfloat16), g
            ),
            "on cpu",
        ),
        (
            lambda g: tp_mlp(
                torch.zeros(8, 16, dtype=torch.bfloat16), torch.zeros(2, 16, 8, dtype=torch.bfloat16), torch.zeros(2, 4, 16), g
            ),
            "3 dimensions",
        ),
    ],
)
def test_bad_inputs_are_refused_before_any_launch(call, message):
    with pytest.raises(UsageError, match=message):
        call(OneGpuGroup(2))
    assert ops.operators() == []


def test_the_mlp_traces_as_two_torch_library_ops():
    from torch.fx.experimental.proxy_tensor import make_fx

    g = OneGpuGroup(4)
    gm = make_fx(lambda x, wgu, wd: tp_mlp(x, wgu, wd, g), tracing_mode="fake")(
        torch.zeros(4, 32, 64), torch.zeros(4, 64, 2 * 24), torch.zeros(4, 24, 64)
    )
    calls = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert calls == ["ovl.all_gather_matmul_silu_mul.default", "ovl.matmul_reduce_scatter.default"]
    (y,) = [n for n in gm.graph.nodes if n.op == "output"][0].args[0:1]
    assert tuple(y.meta["val"].shape) == (4, 32, 64)
