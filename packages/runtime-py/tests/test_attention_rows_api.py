"""``ops.sequence_parallel_attention`` without a GPU (an ``EmulatedGroup``): by default one attention operator compiled
for every sequence length (``ovl emit ag-attention --any-rows``) serves each new length without compiling anything,
overlapped in its range and the plain all-gather of K/V then scaled_dot_product_attention outside it, causal and not;
``OVL_ANY_ROWS=0`` binds the operator of one length; a length of 0, misaligned or non-contiguous tensors and
disagreeing shapes are refused before any launch, and the operator stays usable."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from builders import CLI, compile_on_demand  # noqa: E402

from ovl_runtime import ops  # noqa: E402
from ovl_runtime._kernels import library as lib  # noqa: E402
from ovl_runtime._runner.rows import RowsOperator  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.groups import EmulatedGroup  # noqa: E402
from ovl_runtime.operators.ag_attention.spec import AttentionSpec, torch_attention  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")

WORLD, HEADS, KV_HEADS, D = 2, 2, 1, 16


@pytest.fixture
def kernels(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The CLI compiles on demand into a cache of this module's own; every operator closed afterwards."""
    compile_on_demand(monkeypatch, tmp_path_factory.getbasetemp() / "attn-rows-kernels")
    yield
    ops.close_all()


def _operands(S: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    s = S // WORLD
    return torch.randn(WORLD, s, HEADS, D, generator=gen), torch.randn(WORLD, s, 2, KV_HEADS, D, generator=gen)


def _rel(got: torch.Tensor, q: torch.Tensor, kv: torch.Tensor, causal: bool) -> float:
    s = q.shape[1]
    a = AttentionSpec(HEADS, KV_HEADS, D, causal, D**-0.5)
    every = kv.reshape(WORLD * s, 2 * KV_HEADS * D)
    want = torch.stack([torch_attention(q[r].reshape(s, -1), every, a, r * s) for r in range(WORLD)]).view_as(got)
    return float((got - want).norm() / want.norm())


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_one_operator_serves_every_length_and_a_new_one_compiles_nothing(kernels, monkeypatch, causal):
    g = EmulatedGroup(WORLD)
    q, kv = _operands(512, seed=1)
    assert _rel(ops.sequence_parallel_attention(q, kv, g, causal=causal), q, kv, causal) < 1e-4
    (op,) = ops.operators()
    assert isinstance(op, RowsOperator) and op.m.reference.operator == "ag-attention"
    assert op.m.rows is not None and op.m.rows.max == lib.ROWS_MAX and op.m.rows.multiple == WORLD
    # The crossover is a performance call (the simulator's): lifted so that every length in the range runs the kernel.
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    compiles = []
    monkeypatch.setattr(lib, "compile_key", lambda *a, **kw: compiles.append(a))
    lo = op.rows.min
    for i, S in enumerate((lo, lo + 2 * 37, 514)):  # lengths the operator was not described at
        q, kv = _operands(S, seed=10 + i)
        y = ops.sequence_parallel_attention(q, kv, g, causal=causal)
        assert y.shape == q.shape and _rel(y, q, kv, causal) < 1e-4, S
        assert op.path(S) == "overlapped"
    assert compiles == [] and ops.operators() == [op]
    assert op.describe()["notOverlapped"] == 0 and sorted(op.describe()["bound"]) == sorted({512, lo, lo + 74, 514})
    # Below its range it runs the group's all-gather of K/V then attention, and says so.
    q, kv = _operands(16, seed=30)
    assert _rel(ops.sequence_parallel_attention(q, kv, g, causal=causal), q, kv, causal) < 1e-4
    assert op.path(16).startswith("not overlapped: 16 rows are outside") and op.describe()["notOverlapped"] == 1
    assert compiles == []


def test_ovl_any_rows_0_binds_the_operator_of_one_length(kernels, monkeypatch):
    monkeypatch.setattr(lib, "ANY_ROWS", False)
    g = EmulatedGroup(WORLD)
    q, kv = _operands(256, seed=4)
    assert _rel(ops.sequence_parallel_attention(q, kv, g, causal=True), q, kv, True) < 1e-4
    (op,) = ops.operators()
    assert not isinstance(op, RowsOperator) and op.m.rows is None and op.m.reference.M == 256


def test_the_key_of_a_call_is_the_operator_for_every_length():
    key = lib.call_key("ag-attention", 2, 300, HEADS * D, 2 * KV_HEADS * D, heads=HEADS, causal=True)
    assert key.rows == lib.ROWS_MAX and key.heads == HEADS and key.causal and key.dirname.startswith("ag-attention-w2-rows32768-")
    args = key.cli_args(Path("/o"))
    assert args[args.index("--any-rows") + 1 : args.index("--any-rows") + 3] == ["--max-rows", "32768"] and "--causal" in args
    with pytest.raises(UsageError, match="m must be a positive integer, got 0"):
        lib.call_key("ag-attention", 2, 0, HEADS * D, 2 * KV_HEADS * D, heads=HEADS, causal=True)


def _misaligned(s: int) -> torch.Tensor:
    """``[WORLD, s, HEADS, D]`` float32 one element past a 16-byte boundary."""
    return torch.randn(WORLD * s * HEADS * D + 1)[1:].view(WORLD, s, HEADS, D)


@pytest.mark.parametrize(
    ("q", "kv", "message"),
    [
        (torch.zeros(WORLD, 0, HEADS, D), torch.zeros(WORLD, 0, 2, KV_HEADS, D), "need every size >= 1"),
        (torch.zeros(WORLD, 257, HEADS, D), torch.zeros(WORLD, 256, 2, KV_HEADS, D), "kv must be"),
        (torch.zeros(WORLD, 257, D, HEADS).transpose(2, 3), torch.zeros(WORLD, 257, 2, KV_HEADS, D), "contiguous"),
        (_misaligned(257), torch.zeros(WORLD, 257, 2, KV_HEADS, D), "16-byte aligned"),
        (torch.zeros(WORLD, 257, 3, D), torch.zeros(WORLD, 257, 2, 2, D), "do not share 2 kv heads evenly"),
        (torch.zeros(WORLD + 1, 257, HEADS, D), torch.zeros(WORLD + 1, 257, 2, KV_HEADS, D), "carry 2 ranks"),
        (torch.zeros(WORLD, 257, HEADS, D, dtype=torch.float64), torch.zeros(WORLD, 257, 2, KV_HEADS, D), "float64"),
    ],
    ids=["no-length", "shapes-disagree", "non-contiguous", "misaligned", "heads", "ranks", "dtype"],
)
def test_bad_input_is_refused_before_any_launch_and_the_operator_stays_usable(kernels, q, kv, message):
    g = EmulatedGroup(WORLD)
    good_q, good_kv = _operands(514, seed=5)
    first = ops.sequence_parallel_attention(good_q, good_kv, g, causal=True)
    (op,) = ops.operators()
    calls = op.describe()["calls"]
    with pytest.raises(UsageError, match=message):
        ops.sequence_parallel_attention(q, kv, g, causal=True)
    assert op.describe()["calls"] == calls and ops.operators() == [op]
    again = ops.sequence_parallel_attention(good_q, good_kv, g, causal=True)
    assert torch.equal(again, first) and _rel(again, good_q, good_kv, True) < 1e-4
