"""``ops.moe_all_gather_grouped_matmul`` without a GPU (an ``EmulatedGroup``): by default one AllGather + MoE compiled
for every token count (``ovl emit ag-moe --any-rows``) serves each new M without compiling anything, overlapped in its
range and the plain all-gather then grouped GEMM below it; ``OVL_ANY_ROWS=0`` binds the operator of one M; no tokens,
non-contiguous or misaligned tensors, bad routing and disagreeing shapes are refused before any launch, and the
operator stays usable."""

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

WORLD, E, TOPK, N, K = 2, 4, 2, 64, 64


@pytest.fixture
def kernels(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The CLI compiles on demand into a cache of this module's own; every operator closed afterwards."""
    compile_on_demand(monkeypatch, tmp_path_factory.getbasetemp() / "moe-rows-kernels")
    yield
    ops.close_all()


def _operands(M: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every rank's ``M / WORLD`` tokens, the routing of all ``M`` (the same on every rank) and every rank's experts."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(WORLD, M // WORLD, K, generator=gen)
    ids = torch.stack([torch.randperm(E, generator=gen)[:TOPK] for _ in range(M)]).to(torch.int32)
    return x, ids.expand(WORLD, M, TOPK).contiguous(), torch.randn(WORLD, E, K, N, generator=gen)


def _rel(got: torch.Tensor, x: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> float:
    full = x.reshape(-1, K)
    want = torch.stack([torch.einsum("tk,tjkn->tjn", full, w[r][ids[r].long()]).reshape(-1, N) for r in range(WORLD)])
    return float((got - want).norm() / want.norm())


def _moe(x, ids, w, g):
    return ops.moe_all_gather_grouped_matmul(x, ids, w, g)


def test_one_operator_serves_every_token_count_and_a_new_one_compiles_nothing(kernels, monkeypatch):
    g = EmulatedGroup(WORLD)
    x, ids, w = _operands(256, seed=1)
    assert _rel(_moe(x, ids, w, g), x, ids, w) < 1e-5
    (op,) = ops.operators()
    assert isinstance(op, RowsOperator) and op.m.reference.operator == "ag-moe"
    assert op.m.rows is not None and op.m.rows.max == lib.ROWS_MAX and op.m.rows.multiple == WORLD
    # The crossover is a performance call (the simulator's): lifted so that every call in the range runs the kernels.
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    compiles = []
    monkeypatch.setattr(lib, "compile_key", lambda *a, **kw: compiles.append(a))
    for i, M in enumerate((6, 130, 302)):  # token counts the operator was not described at
        x, ids, w = _operands(M, seed=10 + i)
        y = _moe(x, ids, w, g)
        assert y.shape == (WORLD, M * TOPK, N) and _rel(y, x, ids, w) < 1e-5, M
        assert op.path(M) == "overlapped"
    assert compiles == [] and ops.operators() == [op]
    assert op.describe()["notOverlapped"] == 0 and sorted(op.describe()["bound"]) == [6, 130, 256, 302]
    # Below its crossover it runs the group's all-gather then the grouped GEMM, and says so.
    op.rows = dataclasses.replace(op.rows, fallback_below=200, fallback_reason="a test's crossover")
    x, ids, w = _operands(130, seed=30)
    assert _rel(_moe(x, ids, w, g), x, ids, w) < 1e-5
    assert op.path(130) == "not overlapped below 200 rows: a test's crossover" and op.describe()["notOverlapped"] == 1
    assert compiles == []


def test_the_plain_path_leaves_the_slots_of_dropped_experts_unwritten(kernels):
    g = EmulatedGroup(WORLD)
    x, ids, w = _operands(64, seed=2)
    _moe(x, ids, w, g)
    (op,) = ops.operators()
    op.rows = dataclasses.replace(op.rows, fallback_below=10_000, fallback_reason="a test's crossover")
    bad = ids.clone()
    bad[:, 5, 1] = E  # not an expert: the slot 5·k + 1 is dropped
    y = _moe(x, bad, w, g)
    kept = torch.ones(64 * TOPK, dtype=torch.bool)
    kept[5 * TOPK + 1] = False
    full = x.reshape(-1, K)
    want = full[5] @ w[0][bad[0, 5, 0].long()]
    assert torch.allclose(y[0, 5 * TOPK], want, atol=1e-4) and op.describe()["notOverlapped"] == 1


def test_ovl_any_rows_0_binds_the_operator_of_one_token_count(kernels, monkeypatch):
    monkeypatch.setattr(lib, "ANY_ROWS", False)
    g = EmulatedGroup(WORLD)
    x, ids, w = _operands(64, seed=4)
    assert _rel(_moe(x, ids, w, g), x, ids, w) < 1e-5
    (op,) = ops.operators()
    assert not isinstance(op, RowsOperator) and op.m.rows is None and op.m.reference.M == 64


def _misaligned(m: int) -> torch.Tensor:
    """``[WORLD, m, K]`` float32 one element past a 16-byte boundary."""
    return torch.randn(WORLD * m * K + 1)[1:].view(WORLD, m, K)


def _ids(M: int) -> torch.Tensor:
    return torch.zeros(WORLD, M, TOPK, dtype=torch.int32)


@pytest.mark.parametrize(
    ("x", "ids", "w", "message"),
    [
        (torch.zeros(WORLD, 0, K), _ids(0), torch.zeros(WORLD, E, K, N), "x has no tokens"),
        (torch.zeros(WORLD, K, 65).transpose(1, 2), _ids(130), torch.zeros(WORLD, E, K, N), "must be contiguous"),
        (_misaligned(65), _ids(130), torch.zeros(WORLD, E, K, N), "not 16-byte aligned"),
        (torch.zeros(WORLD, 65, K), _ids(130), torch.zeros(WORLD, E, K + 8, N), "the hidden sizes differ"),
        (torch.zeros(WORLD, 65, K), _ids(128), torch.zeros(WORLD, E, K, N), r"topk_ids must be \[2, 130, k\]"),
        (torch.zeros(WORLD, 65, K), _ids(130).to(torch.int64), torch.zeros(WORLD, E, K, N), "must be an int32"),
        (torch.zeros(WORLD, 65, K), torch.zeros(WORLD, 130, E + 1, dtype=torch.int32), torch.zeros(WORLD, E, K, N), "top-k"),
        (torch.zeros(WORLD + 1, 65, K), _ids(130), torch.zeros(WORLD, E, K, N), "carry 2 ranks"),
        (torch.zeros(WORLD, 65, K, dtype=torch.float64), _ids(130), torch.zeros(WORLD, E, K, N), "float64"),
    ],
    ids=["no-tokens", "non-contiguous", "misaligned", "hidden", "routing-rows", "routing-dtype", "topk", "ranks", "dtype"],
)
def test_bad_input_is_refused_before_any_launch_and_the_operator_stays_usable(kernels, x, ids, w, message):
    g = EmulatedGroup(WORLD)
    good = _operands(130, seed=5)
    first = _moe(*good, g)
    (op,) = ops.operators()
    calls = op.describe()["calls"]
    with pytest.raises(UsageError, match=message):
        _moe(x, ids, w, g)
    assert op.describe()["calls"] == calls and ops.operators() == [op]
    again = _moe(*good, g)
    assert torch.equal(again, first) and _rel(again, *good) < 1e-5
