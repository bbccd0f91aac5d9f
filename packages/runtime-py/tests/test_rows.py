"""One compiled operator for every row count of a range (``ovl emit ag-gemm|gemm-rs|gemm-ar|a2a-gemm|ag-moe --any-rows``):
the manifest is made concrete at each M (``load_manifest(rows=M)``, ``_manifest.rows.instantiate``) and the same emitted
kernels run correctly in both CPU engines at row counts that are not powers of two; M outside the range is refused by
name; the rows operator runs the plain path outside its range."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime.errors import UsageError

CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
needs_cli = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")


def emit_any_rows(tmp_path_factory: pytest.TempPathFactory, op: str, max_rows: int) -> Path:
    """``op`` compiled once for every row count up to ``max_rows`` at world 2 (N = K = 64, 32-row m-blocks, two
    chunks per rank: each rank needs at least 65 rows, so the range starts at 130)."""
    out = tmp_path_factory.mktemp(f"{op}-any")
    cmd = ["node", str(CLI), "emit", op, "--n", "64", "--k", "64", "--m", "256", "--world", "2", "--tile", "32x64x32"]
    cmd += ["--any-rows", "--max-rows", str(max_rows), "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out / "manifest.json"


def assert_emulates(m, M: int) -> None:
    """The concrete manifest at ``M`` runs correctly in the numpy engine (2 epochs) and, where it is available, the
    interpreter (1 epoch)."""
    out = emulate(m, epochs=2, seed=M, engine="numpy")
    assert out.ok and out.failures == [] and len(out.checks) == 2
    if interpret_unavailable() is None:
        out = emulate(m, epochs=1, seed=M + 1, engine="interpret")
        assert out.ok and out.failures == [], out.failures


@pytest.fixture(scope="module")
def any_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emit_any_rows(tmp_path_factory, "ag-gemm", 512)


@needs_cli
def test_the_manifest_serves_a_range_and_says_when_not_to_overlap(any_rows):
    m = load_manifest(any_rows, symbolic=True)
    assert m.rows is not None and (m.rows.min, m.rows.max, m.rows.multiple, m.rows.at) == (130, 512, 2, 256)
    # Where the simulator finds a row count below which overlapping loses, the manifest names it and why.
    assert (m.rows.fallback_below is None) == (m.rows.fallback_reason is None)
    assert m.rows.fallback_reason is None or "simulated on" in m.rows.fallback_reason
    assert any(a.kind == "rows" for _n, a in m.kernels[0].args)
    concrete = load_manifest(any_rows)
    assert concrete.rows is None and concrete.reference.M == 256 and concrete.buffer("A").shape == (256, 64)


@needs_cli
@pytest.mark.parametrize("M", [130, 250, 512])
def test_one_kernel_is_correct_at_row_counts_it_was_not_compiled_at(any_rows, M):
    m = load_manifest(any_rows, rows=M)
    assert m.reference.M == M and m.buffer("A").shape == (M, 64) and m.buffer("gemm_c").shape == (M, 64)
    assert dict(m.kernels[0].args)["M"].value == M
    assert_emulates(m, M)


@pytest.fixture(scope="module")
def rs_any_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emit_any_rows(tmp_path_factory, "gemm-rs", 768)


@needs_cli
def test_one_gemm_rs_manifest_serves_a_range_with_its_push_segments_per_row_count(rs_any_rows):
    m = load_manifest(rs_any_rows, symbolic=True)
    assert m.rows is not None and (m.rows.min, m.rows.max, m.rows.multiple, m.rows.at) == (130, 768, 2, 256)
    assert [k.template_kind for k in m.kernels] == ["local-producer", "sm-push", "rs-reduce-rows"]
    lengths = {}
    for M in (130, 482):
        c = load_manifest(rs_any_rows, rows=M)
        segments = c.table("push_segments").values
        # Each rank pushes its peer's slab (two chunks): M / 2 rows of 64 columns.
        lengths[M] = [sum(r[i + 3] for i in range(0, len(r), 7)) for r in segments]
        assert c.buffer("rs_out").shape == (M // 2, 64) and c.buffer("partials").shape == (M, 64)
    assert lengths == {130: [65 * 64, 65 * 64], 482: [241 * 64, 241 * 64]}


@needs_cli
@pytest.mark.parametrize("M", [130, 322, 766])
def test_one_gemm_rs_kernel_is_correct_at_row_counts_it_was_not_compiled_at(rs_any_rows, M):
    m = load_manifest(rs_any_rows, rows=M)
    assert m.reference.M == M and m.reference.rows_per_rank == M // 2
    assert dict(m.kernels[2].args)["ovl_rows"].value == M
    assert_emulates(m, M)


@needs_cli
def test_the_gemm_rs_rows_operator_overlaps_in_its_range_runs_the_plain_path_outside_and_refuses_bad_input(rs_any_rows):
    torch = pytest.importorskip("torch")
    from ovl_runtime._runner.rows import RowsOperator
    from ovl_runtime.groups import EmulatedGroup

    m = load_manifest(rs_any_rows, symbolic=True)
    op = RowsOperator(m, EmulatedGroup(2))
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(2, 64, 64, generator=gen)
    for M in (130, 322, 128, 1000):  # two in the range, one below it, one above it
        x = torch.randn(2, M, 64, generator=gen)
        out = torch.empty(2, M // 2, 64)
        op.run({"A": x, "B": w}, out)
        want = (x[0] @ w[0] + x[1] @ w[1]).view(2, M // 2, 64)
        assert ((out - want).norm() / want.norm()).item() < 1e-5, M
        overlaps = m.rows is not None and m.rows.serves(M) and (m.rows.fallback_below is None or M >= m.rows.fallback_below)
        assert (op.path(M) == "overlapped") == overlaps
    assert op.path(128).startswith("not overlapped: 128 rows are outside the 130..768")
    assert op.describe()["calls"] == 4 and op.describe()["notOverlapped"] >= 2
    bad = [(torch.randn(2, 131, 64), w, "131 rows do not split over 2 ranks"), (torch.randn(2, 0, 64), w, "0 rows")]
    bad.append((torch.randn(2, 130, 64, dtype=torch.float64), w, "A is torch.float64"))
    for x, ww, why in bad:
        with pytest.raises(UsageError, match=why):
            op.run({"A": x, "B": ww}, torch.empty(2, max(1, x.shape[1] // 2), 64))
    assert op.describe()["calls"] == 4
    op.close()


@needs_cli
def test_a_rows_table_not_shaped_like_its_table_is_refused(rs_any_rows):
    import dataclasses

    from ovl_runtime._manifest.parse import instantiate
    from ovl_runtime.errors import ManifestError

    m = load_manifest(rs_any_rows, symbolic=True)
    raw = json.loads(json.dumps(m.raw))
    raw["rows"]["tables"]["push_segments"] = [r[1:] for r in raw["rows"]["tables"]["push_segments"]]
    with pytest.raises(ManifestError, match="rows.tables.push_segments"):
        instantiate(dataclasses.replace(m, raw=raw), 200)


@pytest.fixture(scope="module")
def ar_any_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The partitioned GEMM+AllReduce over SM pushes and stores.
    return emit_any_rows(tmp_path_factory, "gemm-ar", 768)


@needs_cli
@pytest.mark.parametrize("M", [130, 322, 766])
def test_one_gemm_ar_kernel_is_correct_at_row_counts_it_was_not_compiled_at(ar_any_rows, M):
    m = load_manifest(ar_any_rows, rows=M)
    assert m.reference.operator == "gemm-ar" and m.reference.M == M and m.buffer("ar_out").shape == (M, 64)
    assert [k.template_kind for k in m.kernels] == ["local-producer", "sm-push", "ar-reduce-broadcast-rows", "slot-wait"]
    assert_emulates(m, M)


@needs_cli
def test_the_gemm_ar_rows_operator_runs_the_plain_all_reduce_outside_its_range(ar_any_rows):
    torch = pytest.importorskip("torch")
    from ovl_runtime._runner.rows import RowsOperator
    from ovl_runtime.groups import EmulatedGroup

    m = load_manifest(ar_any_rows, symbolic=True)
    op = RowsOperator(m, EmulatedGroup(2))
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(2, 64, 64, generator=gen)
    for M in (200, 64):  # in the range, below it
        x = torch.randn(2, M, 64, generator=gen)
        out = torch.empty(2, M, 64)
        op.run({"A": x, "B": w}, out)
        want = (x[0] @ w[0] + x[1] @ w[1]).expand(2, M, 64)
        assert ((out - want).norm() / want.norm()).item() < 1e-5, M
    assert op.path(64).startswith("not overlapped: 64 rows are outside")
    op.close()


@pytest.fixture(scope="module")
def a2a_any_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # AllToAll+GEMM: M is every rank's rows (its send buffer and its output), slab q of them exchanged with rank q.
    return emit_any_rows(tmp_path_factory, "a2a-gemm", 768)


@needs_cli
def test_one_a2a_gemm_manifest_exchanges_every_slab_at_each_row_count(a2a_any_rows):
    m = load_manifest(a2a_any_rows, symbolic=True)
    assert m.rows is not None and (m.rows.min, m.rows.max, m.rows.multiple, m.rows.at) == (130, 768, 2, 256)
    assert [k.template_kind for k in m.kernels] == ["local-consumer"] and m.reference.inputs["A"] == "A_send"
    for M in (130, 482):
        c = load_manifest(a2a_any_rows, rows=M)
        assert c.buffer("A").shape == c.buffer("A_send").shape == (M, 64) and c.buffer("gemm_c").shape == (M, 64)
        # Each rank copies M rows into its received buffer (its own slab too), M / 2 of them from its peer.
        moved = {h.rank: [(op.src.rank, op.src.length // 64) for s in h.streams for op in s.ops] for h in c.host_ops}
        for r in (0, 1):
            assert sum(n for _q, n in moved[r]) == M and sum(n for q, n in moved[r] if q != r) == M // 2, (M, moved)


@needs_cli
@pytest.mark.parametrize("M", [130, 322, 766])
def test_one_a2a_gemm_kernel_is_correct_at_row_counts_it_was_not_compiled_at(a2a_any_rows, M):
    m = load_manifest(a2a_any_rows, rows=M)
    assert m.reference.operator == "a2a-gemm" and m.reference.M == M
    assert dict(m.kernels[0].args)["M"].value == M
    assert_emulates(m, M)


@needs_cli
def test_the_a2a_gemm_rows_operator_overlaps_in_its_range_runs_the_plain_exchange_outside_and_refuses_bad_input(a2a_any_rows):
    torch = pytest.importorskip("torch")
    from ovl_runtime._runner.rows import RowsOperator
    from ovl_runtime.groups import EmulatedGroup

    m = load_manifest(a2a_any_rows, symbolic=True)
    op = RowsOperator(m, EmulatedGroup(2))
    gen = torch.Generator().manual_seed(9)
    w = torch.randn(2, 64, 64, generator=gen)
    for M in (130, 322, 64, 1000):  # two in the range, one below it, one above it
        x = torch.randn(2, M, 64, generator=gen)
        out = torch.empty(2, M, 64)
        op.run({"A": x, "B": w}, out)
        # Rank q receives slab q of every rank's rows: slab r of its received rows is slab q of rank r's x.
        received = x.view(2, 2, M // 2, 64).transpose(0, 1).reshape(2, M, 64)
        want = torch.stack([received[q] @ w[q] for q in range(2)])
        assert ((out - want).norm() / want.norm()).item() < 1e-5, M
        moved = torch.empty(2, M, 64)
        op.copy_buffer("A", moved)  # the exchanged rows the weight gradient reuses, from either path
        assert torch.equal(moved, received), M
        overlaps = m.rows is not None and m.rows.serves(M) and (m.rows.fallback_below is None or M >= m.rows.fallback_below)
        assert (op.path(M) == "overlapped") == overlaps
    assert op.path(64).startswith("not overlapped: 64 rows are outside the 130..768")
    assert op.describe()["calls"] == 4 and op.describe()["notOverlapped"] >= 2
    bad = [(torch.randn(2, 131, 64), "131 rows do not split over 2 ranks"), (torch.randn(2, 0, 64), "0 rows")]
    bad.append((torch.randn(2, 130, 64, dtype=torch.float64), "A is torch.float64"))
    for x, why in bad:
        with pytest.raises(UsageError, match=why):
            op.run({"A": x, "B": w}, torch.empty(2, max(1, x.shape[1]), 64))
    assert op.describe()["calls"] == 4
    op.close()


@needs_cli
def test_the_rows_operator_checks_once_per_row_count_that_every_rank_passes_it_on_either_path(a2a_any_rows, monkeypatch):
    torch = pytest.importorskip("torch")
    from ovl_runtime._runner import rows
    from ovl_runtime.groups import EmulatedGroup

    asked: list[int] = []

    def agree(g, signature, what):  # under torchrun a host collective; here a record, and rank 1 passing 322 rows
        asked.append(signature[-1])
        if signature[-1] == 1000:
            raise UsageError(f"{what}: ranks pass different shapes: rank 0: 1000 rows; rank 1: 322 rows")

    monkeypatch.setattr(rows, "same_everywhere", agree)
    op = rows.RowsOperator(load_manifest(a2a_any_rows, symbolic=True), EmulatedGroup(2))
    w = torch.randn(2, 64, 64)
    for M in (130, 64, 130, 64, 322):  # overlapped, plain (below the range), each again: checked once each
        op.run({"A": torch.randn(2, M, 64), "B": w}, torch.empty(2, M, 64))
    assert asked == [130, 64, 322]
    out = torch.full((2, 1000, 64), 7.0)
    with pytest.raises(UsageError, match="ranks pass different shapes"):
        op.run({"A": torch.randn(2, 1000, 64), "B": w}, out)
    assert bool((out == 7.0).all()) and op.describe()["calls"] == 5  # refused before anything ran
    op.run({"A": torch.randn(2, 322, 64), "B": w}, torch.empty(2, 322, 64))  # still usable
    op.close()


# ---- AllGather + MoE: the token count M, its routing sizes, body grid and gather over M ----


@pytest.fixture(scope="module")
def moe_any_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ag-moe at world 2 (hidden = intermediate = 64, 4 experts, top-2, 16-row routing blocks) for every token count up
    to 512 (two chunks per rank: at least 3 tokens each, so the range starts at 6)."""
    out = tmp_path_factory.mktemp("ag-moe-any")
    cmd = ["node", str(CLI), "emit", "ag-moe", "--tokens", "256", "--hidden", "64", "--intermediate", "64", "--experts", "4"]
    cmd += ["--topk", "2", "--world", "2", "--tile", "16x32x32", "--any-rows", "--max-rows", "512", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out / "manifest.json"


@needs_cli
def test_one_ag_moe_manifest_sizes_its_routing_and_gather_at_each_token_count(moe_any_rows):
    m = load_manifest(moe_any_rows, symbolic=True)
    assert m.rows is not None and (m.rows.min, m.rows.max, m.rows.multiple, m.rows.at) == (6, 512, 2, 256)
    for M in (6, 130, 510):
        c = load_manifest(moe_any_rows, rows=M)
        blocks = -(-(2 * M + 4 * 15) // 16)
        assert c.reference.M == M and c.rows is None
        assert {b.name: b.shape[0] for b in c.buffers if b.name in ("X", "moe_c", "moe_sorted_token_ids")} == {
            "X": M,
            "moe_c": 2 * M,
            "moe_sorted_token_ids": blocks * 16,
        }
        count, scatter, body = c.kernels
        assert dict(scatter.args)["NUMEL"].value == 2 * M and dict(scatter.args)["MAX_BLOCKS"].value == blocks
        assert count.grid == scatter.grid == (32,) and body.grid == (blocks * 2,)
        assert body.tile_program is not None and body.tile_program.gather is not None
        assert (body.tile_program.gather.limit, body.tile_program.gather.row_count) == (2 * M, M)
        # The kernels' sizes that change with M are not specialised on (a new M compiles nothing).
        assert {"M", "NUMEL", "PER", "MAX_BLOCKS", "PER_B"} <= c.rows_args


@needs_cli
@pytest.mark.parametrize("M", [130, 322, 510])
def test_one_ag_moe_kernel_is_correct_at_token_counts_it_was_not_compiled_at(moe_any_rows, M):
    assert_emulates(load_manifest(moe_any_rows, rows=M), M)


@needs_cli
@pytest.mark.parametrize(
    ("compiled", "M", "why"),
    [
        *(("any_rows", M, why) for M, why in [(131, "multiples of 2"), (128, "130..512"), (514, "130..512")]),
        *(
            (f, M, why)
            for f in ("rs_any_rows", "a2a_any_rows")
            for M, why in [(131, "multiples of 2"), (128, "130..768"), (770, "130..768")]
        ),
        *(("moe_any_rows", M, why) for M, why in [(4, "6..512"), (514, "6..512"), (131, "multiples of 2")]),
    ],
)
def test_a_row_count_outside_the_range_is_refused_by_name(request, compiled, M, why):
    with pytest.raises(UsageError, match=why):
        load_manifest(request.getfixturevalue(compiled), rows=M)
