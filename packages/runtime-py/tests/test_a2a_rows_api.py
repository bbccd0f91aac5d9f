"""``ops.all_to_all_matmul`` without a GPU (an ``EmulatedGroup``): by default one AllToAll+GEMM compiled for every row
count (``ovl emit a2a-gemm --any-rows``) serves each new M without compiling anything, overlapped in its range and
the plain all-to-all then matmul below it; ``OVL_ANY_ROWS=0`` binds the operator of one M; M = 0, misaligned or
non-contiguous tensors and disagreeing shapes are refused before any launch, and the operator stays usable."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

torch = pytest.importorskip("torch")

from builders import CLI, compile_on_demand  # noqa: E402

from ovl_runtime import ops  # noqa: E402
from ovl_runtime._kernels import library as lib  # noqa: E402
from ovl_runtime._runner.rows import RowsOperator  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.groups import EmulatedGroup  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")

WORLD, N, K = 2, 64, 64


@pytest.fixture
def kernels(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The CLI compiles on demand into a cache of this module's own; every operator closed afterwards."""
    compile_on_demand(monkeypatch, tmp_path_factory.getbasetemp() / "a2a-rows-kernels")
    yield
    ops.close_all()


def _operands(M: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(WORLD, M, K, generator=gen), torch.randn(WORLD, K, N, generator=gen)


def _received(x: torch.Tensor) -> torch.Tensor:
    """Per rank q, slab r of its received rows is slab q of rank r's ``x``."""
    world, M, k = x.shape
    return x.view(world, world, M // world, k).transpose(0, 1).reshape(world, M, k)


def _rel(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> float:
    want = _received(x) @ w
    return float((got - want).norm() / want.norm())


def test_one_operator_serves_every_row_count_and_a_new_one_compiles_nothing(kernels, monkeypatch):
    g = EmulatedGroup(WORLD)
    x, w = _operands(1024, seed=1)
    assert _rel(ops.all_to_all_matmul(x, w, g), x, w) < 1e-5
    (op,) = ops.operators()
    assert isinstance(op, RowsOperator) and op.m.reference.operator == "a2a-gemm"
    assert op.m.rows is not None and op.m.rows.max == lib.ROWS_MAX and op.m.rows.multiple == WORLD
    # The crossover is a performance call (the simulator's, which at N = K = 64 says not to overlap): lifted here so
    # that every call in the range runs the compiled kernel.
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    compiles = []
    monkeypatch.setattr(lib, "compile_key", lambda *a, **kw: compiles.append(a))
    lo = op.rows.min
    for i, M in enumerate((lo, lo + 2 * 37, 1030)):  # row counts the operator was not described at
        x, w = _operands(M, seed=10 + i)
        y = ops.all_to_all_matmul(x, w, g)
        assert y.shape == (WORLD, M, N) and _rel(y, x, w) < 1e-5, M
        assert op.path(M) == "overlapped"
    assert compiles == [] and ops.operators() == [op]
    assert op.describe()["notOverlapped"] == 0 and sorted(op.describe()["bound"]) == sorted({1024, lo, lo + 74, 1030})
    # Below its range it runs the group's all-to-all then one matmul, and says so.
    x, w = _operands(16, seed=30)
    assert _rel(ops.all_to_all_matmul(x, w, g), x, w) < 1e-5
    assert op.path(16).startswith("not overlapped: 16 rows are outside") and op.describe()["notOverlapped"] == 1
    assert compiles == []


@pytest.mark.parametrize("M", [1030, 16], ids=["overlapped", "plain"])
def test_the_weight_gradient_reuses_the_exchanged_rows_of_either_path(kernels, M):
    g = EmulatedGroup(WORLD)
    x, w = _operands(M, seed=3)
    ops.all_to_all_matmul(x, w, g)  # binds the operator
    (op,) = ops.operators()
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    w.requires_grad_(True)
    y = ops.all_to_all_matmul(x, w, g)
    dy = torch.randn_like(y)
    (y * dy).sum().backward()
    assert (op.path(M) == "overlapped") == (M == 1030)
    want = _received(x).transpose(-1, -2) @ dy
    assert w.grad is not None and float((w.grad - want).norm() / want.norm()) < 1e-5


def test_ovl_any_rows_0_binds_the_operator_of_one_row_count(kernels, monkeypatch):
    monkeypatch.setattr(lib, "ANY_ROWS", False)
    g = EmulatedGroup(WORLD)
    x, w = _operands(256, seed=4)
    assert _rel(ops.all_to_all_matmul(x, w, g), x, w) < 1e-5
    (op,) = ops.operators()
    assert not isinstance(op, RowsOperator) and op.m.rows is None and op.m.reference.M == 256


def _misaligned(M: int) -> torch.Tensor:
    """``[WORLD, M, K]`` float32 one element past a 16-byte boundary."""
    return torch.randn(WORLD * M * K + 1)[1:].view(WORLD, M, K)


@pytest.mark.parametrize(
    ("x", "w", "message"),
    [
        (torch.zeros(WORLD, 0, K), torch.zeros(WORLD, K, N), "m must be a positive integer, got 0"),
        (torch.zeros(WORLD, 1031, K), torch.zeros(WORLD, K, N), "1031 rows do not split into 2 equal slabs"),
        (torch.zeros(WORLD, K, 1030).transpose(1, 2), torch.zeros(WORLD, K, N), "must be contiguous"),
        (_misaligned(1030), torch.zeros(WORLD, K, N), "not 16-byte aligned"),
        (torch.zeros(WORLD, 1030, K), torch.zeros(WORLD, K + 8, N), "inner dimensions differ"),
        (torch.zeros(WORLD + 1, 1030, K), torch.zeros(WORLD, K, N), "carry 2 ranks"),
        (torch.zeros(WORLD, 1030, K, dtype=torch.float64), torch.zeros(WORLD, K, N), "float64"),
    ],
    ids=["no-rows", "uneven-slabs", "non-contiguous", "misaligned", "inner-dims", "ranks", "dtype"],
)
def test_bad_input_is_refused_before_any_launch_and_the_operator_stays_usable(kernels, x, w, message):
    g = EmulatedGroup(WORLD)
    good_x, good_w = _operands(1030, seed=5)
    first = ops.all_to_all_matmul(good_x, good_w, g)
    (op,) = ops.operators()
    calls = op.describe()["calls"]
    with pytest.raises(UsageError, match=message):
        ops.all_to_all_matmul(x, w, g)
    assert op.describe()["calls"] == calls and ops.operators() == [op]
    again = ops.all_to_all_matmul(good_x, good_w, g)
    assert torch.equal(again, first) and _rel(again, good_x, good_w) < 1e-5
