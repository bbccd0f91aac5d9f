"""fp8 e4m3 AllGather+GEMM without a GPU: ``C = (AllGather(A) @ B) * scale_a * scale_b`` in bf16 from fp8 operands
with per-tensor float32 scales. The operator compiled by ovl's CLI (``--dtype fp8e4m3``) runs in both CPU engines at
worlds 2 and 4 on fresh random data and matches the float reference of the same fp8 values; the torch API takes fp8
``x`` / ``w`` with ``scale_a`` / ``scale_b`` on an emulated group (the overlapped operator and, below its rows, the
plain path), honours a changed scale between calls, and refuses a bad fp8 call before any launch."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ovl_runtime import emulate, load_manifest, ops  # noqa: E402
from ovl_runtime._emulate.interpret_load import interpret_unavailable  # noqa: E402
from ovl_runtime._kernels import library as lib  # noqa: E402
from ovl_runtime._manifest.fp8 import E4M3_MAX, round_e4m3  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.groups import EmulatedGroup, OneGpuGroup  # noqa: E402

CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
needs_cli = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")
FP8 = torch.float8_e4m3fn
#: The compiler's fp8 tolerance (``DEFAULT_TOLERANCE.fp8e4m3``): the reference is computed from the same fp8 values,
#: so what remains is the fp32 accumulation order and the one bf16 rounding of the output.
FP8_TOLERANCE = 1e-2


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """The CLI compiles every key once into this module's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OVL_CLI", f"node {CLI}")
        mp.setenv("OVL_CACHE_DIR", str(tmp_path_factory.mktemp("fp8-kernels")))
        mp.setenv("OVL_KERNELS", "")
        mp.delenv("OVL_TARGET", raising=False)
        yield
    ops.close_all()


def _engines() -> list[str]:
    return ["numpy"] if interpret_unavailable() is not None else ["numpy", "interpret"]


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def _operands(world: int, m: int, n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh random fp8 ``x`` [world, m, k] and a column-major fp8 ``w`` [world, k, n] (Bt [n, k] transposed)."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(world, m, k, generator=gen) * 2).to(FP8)
    bt = (torch.randn(world, n, k, generator=gen) * 2).to(FP8)
    return x, bt.transpose(-1, -2)


def _reference(x: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    """Every rank's ``(cat(x) @ w) * scale`` in float32 from the fp8 values."""
    world = x.shape[0]
    full = x.float().reshape(-1, x.shape[-1])
    return torch.stack([(full @ w[r].float()) * scale for r in range(world)])


# ---- the numpy engine's fp8 values ----
def test_round_e4m3_matches_torchs_float8_e4m3fn_conversion():
    rng = np.random.default_rng(11)
    x = np.concatenate(
        [rng.standard_normal(4000).astype(np.float32) * s for s in (1e-3, 0.1, 1, 30, 300)]
        + [np.array([0.0, 2.0**-9, 2.0**-10, 0.0625, 1.0625, 448.0, -448.0, 240.0, 0.001953125 * 1.5], dtype=np.float32)]
    )
    x = np.clip(x, -E4M3_MAX, E4M3_MAX)
    want = torch.from_numpy(x).to(FP8).float().numpy()
    np.testing.assert_array_equal(round_e4m3(x), want)


# ---- the kernel library ----
def test_fp8_keys_compile_ag_gemm_only():
    k = lib.KernelKey("ag-gemm", 2, 256, 128, 128, "fp8e4m3", target="")
    assert k.dirname == "ag-gemm-w2-m256-n128-k128-fp8e4m3"
    args = k.cli_args(Path("/o"))
    assert args[args.index("--dtype") + 1] == "fp8e4m3"
    for op, extra in (("gemm-rs", {}), ("gemm-ar", {}), ("a2a-gemm", {}), ("ag-moe", {"experts": 4, "topk": 2})):
        with pytest.raises(UsageError, match=f"{op} is not compiled for fp8e4m3: fp8 operands are taken by ag-gemm only"):
            lib.KernelKey(op, 2, 256, 128, 128, "fp8e4m3", **extra)


# ---- the compiled operator in both engines ----
@needs_cli
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("engine", _engines())
def test_the_fp8_operator_emulates_within_its_tolerance(kernels, world, engine):
    key = lib.KernelKey("ag-gemm", world, 128 * world, 64, 128, "fp8e4m3", target="")
    path = lib.ensure_compiled(key)
    m = load_manifest(path)
    lib.check_manifest(m, key, path)
    assert m.dtype == "fp8e4m3" and m.reference.tolerance == FP8_TOLERANCE
    assert {n: m.buffer(b).dtype for n, b in m.reference.inputs.items()} == {
        "A": "fp8e4m3",
        "B": "fp8e4m3",
        "scale_a": "fp32",
        "scale_b": "fp32",
    }
    assert m.buffer(m.reference.output).dtype == "bf16"
    # Fresh random inputs per checked launch (seeded per run), two launches: the signal slots carry over.
    out = emulate(m, epochs=2, seed=world * 7 + 1, engine=engine)
    out.raise_for_failure()
    assert len(out.checks) >= 1
    for c in out.checks:
        assert c.ok and c.tolerance == FP8_TOLERANCE and c.max_rel_error < FP8_TOLERANCE


# ---- the torch API ----
@needs_cli
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("engine", _engines())
def test_all_gather_matmul_takes_fp8_with_scales_and_honours_a_changed_scale(kernels, world, engine, monkeypatch):
    # World 2: the any-row-count operator (M = 640 is inside the rows it overlaps). World 4: the operator compiled for
    # this M (the simulator says the any-row-count one would not overlap at so small an N, and would take the plain path).
    any_rows = world == 2
    monkeypatch.setattr(lib, "ANY_ROWS", any_rows)
    g = EmulatedGroup(world, engine=engine)
    m, n, k = 320, 64, 128
    x, w = _operands(world, m, n, k, seed=world)
    sa, sb = torch.tensor(0.75), torch.tensor(1.5)
    out = ops.all_gather_matmul(x, w, g, scale_a=sa, scale_b=sb)
    assert out.dtype == torch.bfloat16 and out.shape == (world, world * m, n)
    assert _rel(out, _reference(x, w, 0.75 * 1.5)) < FP8_TOLERANCE
    op = ops.operators()[-1]
    assert op.m.dtype == "fp8e4m3" and (op.m.rows is not None) == any_rows
    if any_rows:  # the compiled fp8 operator ran, not the plain path
        assert op.describe()["notOverlapped"] == 0, op.describe()
    # The same tensors, a new scale value in place: the next call reads it.
    sb.fill_(-3.0)
    again = ops.all_gather_matmul(x, w, g, scale_a=sa, scale_b=sb)
    assert _rel(again, _reference(x, w, 0.75 * -3.0)) < FP8_TOLERANCE
    assert _rel(again, out.float() * -2.0) < FP8_TOLERANCE


@needs_cli
def test_below_its_rows_the_plain_path_computes_the_same_scaled_product(kernels):
    g = EmulatedGroup(2)
    x, w = _operands(2, 16, 32, 64, seed=5)
    out = ops.all_gather_matmul(x, w, g, scale_a=torch.tensor(0.5), scale_b=torch.tensor(4.0))
    assert ops.operators()[-1].describe()["notOverlapped"] == 1
    assert _rel(out, _reference(x, w, 2.0)) < FP8_TOLERANCE


def _fp8(world=2, m=8, n=16, k=32):
    return _operands(world, m, n, k, seed=1)


ONE = torch.tensor(1.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda g: ops.all_gather_matmul(*_fp8(), g), "fp8 operands need both scale_a and scale_b"),
        (lambda g: ops.all_gather_matmul(*_fp8(), g, scale_a=ONE), "fp8 operands need both scale_a and scale_b"),
        (
            lambda g: ops.all_gather_matmul(
                torch.zeros(2, 8, 32, dtype=torch.bfloat16), torch.zeros(2, 32, 16, dtype=torch.bfloat16), g, scale_a=ONE, scale_b=ONE
            ),
            "scale_a and scale_b go with fp8 operands, and x is torch.bfloat16",
        ),
        (
            lambda g: ops.all_gather_matmul(_fp8()[0], torch.zeros(2, 32, 16, dtype=torch.bfloat16), g, scale_a=ONE, scale_b=ONE),
            "and w is torch.bfloat16",
        ),
        (
            lambda g: ops.all_gather_matmul(*_fp8(), g, scale_a=torch.tensor(1.0, dtype=torch.float16), scale_b=ONE),
            "scale_a must be a float32 tensor of one element; got torch.float16",
        ),
        (
            lambda g: ops.all_gather_matmul(*_fp8(), g, scale_a=ONE, scale_b=torch.ones(2)),
            "scale_b must be a float32 tensor of one element",
        ),
        (
            lambda g: ops.all_gather_matmul(_fp8()[0], _fp8()[1].contiguous(), g, scale_a=ONE, scale_b=ONE),
            "an fp8 w must be column-major, as torch._scaled_mm takes it",
        ),
        (
            lambda g: ops.all_gather_matmul(*_fp8(), g, scale_a=torch.tensor(1.0, requires_grad=True), scale_b=ONE),
            "fp8 operands are an inference format",
        ),
        (
            lambda g: ops.matmul_reduce_scatter(*_fp8(), g),
            "x is torch.float8_e4m3fn; .*fp8 e4m3 operands, with per-tensor scales, are taken by all_gather_matmul only",
        ),
    ],
)
def test_bad_fp8_calls_are_refused_before_any_launch(call, message):
    before = ops.operators()
    for g in (OneGpuGroup(2), EmulatedGroup(2)):
        with pytest.raises(UsageError, match=message):
            call(g)
    assert ops.operators() == before  # nothing bound, compiled or launched


def test_an_fp8_call_on_cpu_tensors_is_refused_on_a_gpu_group():
    x, w = _fp8()
    with pytest.raises(UsageError, match="x is on cpu; the operators run on CUDA tensors"):
        ops.all_gather_matmul(x, w, OneGpuGroup(2), scale_a=ONE, scale_b=ONE)


def test_a_one_gpu_groups_scales_are_copied_per_rank_at_16_byte_rows_and_the_plain_product_reads_their_first():
    from ovl_runtime._torch_api.fp8 import SCALE_ROW, per_rank_scale, scaled_matmul

    s = per_rank_scale(torch.tensor(3.0), OneGpuGroup(4))
    assert s.shape == (4, SCALE_ROW) and s.stride(0) * s.element_size() == 16 and bool((s == 3.0).all())
    assert per_rank_scale(torch.tensor(3.0), EmulatedGroup(4)).shape == (4,)
    x, w = _operands(4, 8, 16, 32, seed=2)
    out = torch.empty(4, 32, 16, dtype=torch.bfloat16)
    scaled_matmul(x.reshape(1, 32, 32).expand(4, 32, 32), w.transpose(-1, -2), s, per_rank_scale(torch.tensor(0.5), OneGpuGroup(4)), out)
    assert _rel(out, _reference(x, w, 1.5)) < FP8_TOLERANCE
