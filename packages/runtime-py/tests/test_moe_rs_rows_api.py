"""``ops.moe_grouped_matmul_reduce_scatter`` without a GPU (an ``EmulatedGroup``): by default one MoE + ReduceScatter
compiled for every token count (``ovl emit moe-rs --any-rows``) serves each new T without compiling anything,
overlapped in its range and the plain grouped GEMM then reduce-scatter below it; ``OVL_ANY_ROWS=0`` binds the operator
of one T; no tokens, non-contiguous or misaligned tensors and disagreeing shapes are refused before any launch, and
the operator stays usable."""

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

WORLD, E, TOPK, H, INTER = 2, 4, 2, 64, 32


@pytest.fixture
def kernels(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The CLI compiles on demand into a cache of this module's own; every operator closed afterwards."""
    compile_on_demand(monkeypatch, tmp_path_factory.getbasetemp() / "moe-rs-rows-kernels")
    yield
    ops.close_all()


def _operands(T: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every rank's slot rows ``[T·k, INTER]``, the routing of all T tokens (the same on every rank) and every rank's
    experts ``[E, INTER, H]``."""
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(WORLD, T * TOPK, INTER, generator=gen)
    ids = torch.stack([torch.randperm(E, generator=gen)[:TOPK] for _ in range(T)]).to(torch.int32)
    wts = torch.rand(T, TOPK, generator=gen)
    rep = lambda t: t.expand(WORLD, *t.shape).contiguous()  # noqa: E731
    return h, rep(ids), rep(wts), torch.randn(WORLD, E, INTER, H, generator=gen)


def _rel(got: torch.Tensor, h: torch.Tensor, ids: torch.Tensor, wts: torch.Tensor, w: torch.Tensor) -> float:
    T = ids.shape[1]
    rows = [torch.einsum("tjk,tjkn->tjn", h[r].view(T, TOPK, INTER), w[r][ids[r].long()]) for r in range(WORLD)]
    want = sum((y * wts[r][..., None]).sum(1) for r, y in enumerate(rows)).view(WORLD, T // WORLD, H)
    return float((got - want).norm() / want.norm())


def _moe_rs(h, ids, wts, w, g):
    return ops.moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g)


def test_one_operator_serves_every_token_count_and_a_new_one_compiles_nothing(kernels, monkeypatch):
    g = EmulatedGroup(WORLD)
    first = _operands(64, seed=1)
    assert _rel(_moe_rs(*first, g), *first) < 1e-5
    (op,) = ops.operators()
    assert isinstance(op, RowsOperator) and op.m.reference.operator == "moe-rs"
    assert op.m.rows is not None and op.m.rows.max == lib.ROWS_MAX and op.m.rows.multiple == WORLD
    # The crossover is a performance call (the simulator's): lifted so that every call in the range runs the kernels.
    op.rows = dataclasses.replace(op.rows, fallback_below=None, fallback_reason=None)
    compiles = []
    monkeypatch.setattr(lib, "compile_key", lambda *a, **kw: compiles.append(a))
    for i, T in enumerate((6, 130, 302)):  # token counts the operator was not described at
        args = _operands(T, seed=10 + i)
        y = _moe_rs(*args, g)
        assert y.shape == (WORLD, T // WORLD, H) and _rel(y, *args) < 1e-5, T
        assert op.path(T) == "overlapped"
    assert compiles == [] and ops.operators() == [op]
    assert op.describe()["notOverlapped"] == 0 and sorted(op.describe()["bound"]) == [6, 64, 130, 302]
    # Below its crossover it runs the grouped GEMM then the group's reduce-scatter, and says so.
    op.rows = dataclasses.replace(op.rows, fallback_below=200, fallback_reason="a test's crossover")
    args = _operands(130, seed=30)
    assert _rel(_moe_rs(*args, g), *args) < 1e-5
    assert op.path(130) == "not overlapped below 200 rows: a test's crossover" and op.describe()["notOverlapped"] == 1
    assert compiles == []


def test_the_plain_path_drops_the_slots_of_unknown_experts(kernels):
    g = EmulatedGroup(WORLD)
    h, ids, wts, w = _operands(64, seed=2)
    _moe_rs(h, ids, wts, w, g)
    (op,) = ops.operators()
    op.rows = dataclasses.replace(op.rows, fallback_below=10_000, fallback_reason="a test's crossover")
    bad = ids.clone()
    bad[:, 5, 1] = E  # not an expert: the slot 5·k + 1 adds nothing
    y = _moe_rs(h, bad, wts, w, g)
    want = sum(wts[r, 5, 0] * (h[r, 5 * TOPK] @ w[r][bad[r, 5, 0].long()]) for r in range(WORLD))
    assert torch.allclose(y[0, 5], want, atol=1e-4) and op.describe()["notOverlapped"] == 1


def test_ovl_any_rows_0_binds_the_operator_of_one_token_count(kernels, monkeypatch):
    monkeypatch.setattr(lib, "ANY_ROWS", False)
    g = EmulatedGroup(WORLD)
    args = _operands(64, seed=4)
    assert _rel(_moe_rs(*args, g), *args) < 1e-5
    (op,) = ops.operators()
    assert not isinstance(op, RowsOperator) and op.m.rows is None and op.m.reference.M == 64


def _misaligned(slots: int) -> torch.Tensor:
    """``[WORLD, slots, INTER]`` float32 one element past a 16-byte boundary."""
    return torch.randn(WORLD * slots * INTER + 1)[1:].view(WORLD, slots, INTER)


def _ids(T: int) -> torch.Tensor:
    return torch.zeros(WORLD, T, TOPK, dtype=torch.int32)


def _wts(T: int) -> torch.Tensor:
    return torch.full((WORLD, T, TOPK), 0.5)


W2 = torch.zeros(WORLD, E, INTER, H)


@pytest.mark.parametrize(
    ("h", "ids", "wts", "w", "message"),
    [
        (torch.zeros(WORLD, 0, INTER), _ids(0), _wts(0), W2, "no tokens"),
        (torch.zeros(WORLD, INTER, 260).transpose(1, 2), _ids(130), _wts(130), W2, "must be contiguous"),
        (_misaligned(260), _ids(130), _wts(130), W2, "not 16-byte aligned"),
        (torch.zeros(WORLD, 260, INTER), _ids(130), _wts(130), torch.zeros(WORLD, E, INTER + 8, H), "the intermediate sizes differ"),
        (torch.zeros(WORLD, 258, INTER), _ids(130), _wts(130), W2, "h has 258 rows per rank"),
        (torch.zeros(WORLD, 260, INTER), _ids(130), _wts(128), W2, "topk_weights must be"),
        (torch.zeros(WORLD, 260, INTER), _ids(130).to(torch.int64), _wts(130), W2, "must be a torch.int32"),
        (torch.zeros(WORLD, 262, INTER), _ids(131), _wts(131), W2, "divide evenly over the world"),
        (torch.zeros(WORLD, 260, INTER, dtype=torch.float64), _ids(130), _wts(130), W2, "float64"),
    ],
    ids=["no-tokens", "non-contiguous", "misaligned", "inter", "slots", "weights", "routing-dtype", "world", "dtype"],
)
def test_bad_input_is_refused_before_any_launch_and_the_operator_stays_usable(kernels, h, ids, wts, w, message):
    g = EmulatedGroup(WORLD)
    good = _operands(130, seed=5)
    first = _moe_rs(*good, g)
    (op,) = ops.operators()
    calls = op.describe()["calls"]
    with pytest.raises(UsageError, match=message):
        _moe_rs(h, ids, wts, w, g)
    assert op.describe()["calls"] == calls and ops.operators() == [op]
    again = _moe_rs(*good, g)
    assert torch.equal(again, first) and _rel(again, *good) < 1e-5


def test_the_torch_api_binds_moe_rs_for_every_token_count_by_default(monkeypatch):
    # The operator for every token count, as for ag-moe; ``OVL_ANY_ROWS=0`` binds the operator of one count.
    monkeypatch.setattr(lib, "ANY_ROWS", True)
    key = lib.call_key("moe-rs", WORLD, 256, H, INTER, "bf16", experts=E, topk=TOPK)
    assert key == lib.rows_key("moe-rs", WORLD, H, INTER, "bf16", experts=E, topk=TOPK)
    assert key.rows == lib.ROWS_MAX and (key.experts, key.topk) == (E, TOPK)
    assert lib.call_key("ag-moe", WORLD, 256, INTER, H, "bf16", experts=E, topk=TOPK).rows
    monkeypatch.setattr(lib, "ANY_ROWS", False)  # OVL_ANY_ROWS=0
    key = lib.call_key("moe-rs", WORLD, 256, H, INTER, "bf16", experts=E, topk=TOPK)
    assert not key.rows and key.m == 256 and (key.experts, key.topk) == (E, TOPK)
