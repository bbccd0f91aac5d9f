"""MoE + ReduceScatter for every token count (``ovl emit moe-rs --any-rows``): one compiled operator is made concrete at
each T (``load_manifest(rows=T)``) with its slabs, routing sizes and runner kernels' arguments as the per-T compile's,
and the same emitted kernels run correctly in both CPU engines at token counts it was not described at, the default
warp-specialised body (notified once a launch) and the per-tile one (its slab notifies over the run-time T); a T
outside the range is refused by name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "cli" / "dist" / "bin.js"
PER_TILE = ROOT / "tlx-emitter" / "kernels" / "moe_gemm_scatter.py"
pytestmark = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")


def emit(tmp_path_factory: pytest.TempPathFactory, *more: str) -> Path:
    """moe-rs at world 2 (hidden 64, intermediate 32 a rank, 4 experts, top-2, 16-row routing blocks, 2 slabs a rank)
    for every token count up to 512 (one token a slab: multiples of 4 from 4)."""
    out = tmp_path_factory.mktemp("moe-rs-any")
    cmd = ["node", str(CLI), "emit", "moe-rs", "--tokens", "64", "--hidden", "64", "--intermediate", "32", "--experts", "4"]
    cmd += ["--topk", "2", "--world", "2", "--tile", "16x32x32", *more, "--any-rows", "--max-rows", "512", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out / "manifest.json"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emit(tmp_path_factory)


@pytest.fixture(scope="module")
def per_tile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emit(tmp_path_factory, "--kernel", str(PER_TILE))


def test_one_manifest_sizes_its_slabs_routing_and_reducer_at_each_token_count(ws):
    m = load_manifest(ws, symbolic=True)
    assert m.rows is not None and (m.rows.min, m.rows.max, m.rows.multiple, m.rows.at) == (4, 512, 4, 64)
    for T in (4, 44, 508):
        c = load_manifest(ws, rows=T)
        blocks = -(-(2 * T + 4 * 15) // 16)
        assert c.reference.M == T and c.reference.rows_per_rank == T // 2 and c.rows is None
        sizes = {b.name: b.shape[0] for b in c.buffers}
        assert (sizes["moe_h"], sizes["moe_partial_tok"], sizes["moe_out"], sizes["moe_sorted_token_ids"]) == (
            2 * T,
            T,
            T // 2,
            blocks * 16,
        )
        # The slabs keep their number (2 a rank) and grow with T: the signals are the same at every T.
        assert sizes["moe_slab_expect"] == 4 and c.signals.slots == 5
        k = {x.name: x for x in c.kernels}
        assert dict(k["moe_slab_expect"].args)["SLAB_T"].value == T // 4 and dict(k["moe_topk_reduce_rs"].args)["SLAB_T"].value == T // 4
        assert dict(k["moe_slab_expect"].args)["SLOTS"].value == 2 * T and k["moe_permute_rows"].grid == (blocks,)
        assert dict(k["moe_topk_sum"].args)["T"].value == T
        # The kernels' sizes that change with T are not specialised on (a new T compiles nothing).
        assert {"NUMEL", "PER", "MAX_BLOCKS", "PER_B", "SLOTS", "SLAB_T", "T"} <= c.rows_args


def _emulates(path: Path, T: int) -> None:
    m = load_manifest(path, rows=T)
    out = emulate(m, epochs=2, seed=T, engine="numpy")
    assert out.ok and out.failures == [] and len(out.checks) == 2, out.failures
    if interpret_unavailable() is None:
        # The interpreter runs each rank's kernels on a thread of one process; a wait's bound is real time, and the
        # per-tile producer at the largest T outlasted the manifest's 5 s bound on a 2-core machine.
        out = emulate(m, epochs=1, seed=T + 1, engine="interpret", timeout_s=180)
        assert out.ok and out.failures == [], out.failures


@pytest.mark.parametrize("T", [12, 100, 260])
def test_one_warp_specialised_kernel_is_correct_at_token_counts_it_was_not_compiled_at(ws, T):
    _emulates(ws, T)


@pytest.mark.parametrize("T", [8, 68, 196])
def test_one_per_tile_kernel_notifies_its_slabs_at_token_counts_it_was_not_compiled_at(per_tile, T):
    (producer,) = (k for k in load_manifest(per_tile).kernels if k.name.endswith("_producer"))
    assert "ovl_rows" in (per_tile.parent / producer.source).read_text()
    _emulates(per_tile, T)


@pytest.mark.parametrize(("T", "why"), [(2, "4..512"), (516, "4..512"), (6, "multiples of 4")])
def test_a_token_count_outside_the_range_is_refused_by_name(ws, T, why):
    with pytest.raises(UsageError, match=why):
        load_manifest(ws, rows=T)


def test_the_runner_kernels_it_imports_are_never_specialised_on_the_sizes_that_change_with_t(ws):
    """The emitted runner module of the any-count operator imports the ``_rows`` kernels (their own JIT objects), so
    neither a new T nor a per-count operator's earlier launches fix a variant specialised on those sizes."""
    import importlib.util

    from ovl_runtime.operators.moe_rs import kernels as per_count

    (source,) = {k.source for k in load_manifest(ws).kernels if k.name == "moe_slab_expect"}
    spec = importlib.util.spec_from_file_location("moe_rs_any_count_runner", ws.parent / source)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sizes = {"moe_permute_rows": ["SLOTS"], "moe_slab_expect": ["SLOTS", "SLAB_T"], "moe_topk_sum": ["T"], "moe_topk_reduce_rs": ["SLAB_T"]}
    for name, args in sizes.items():
        fn = getattr(mod, name)
        assert fn is not getattr(per_count, name) and fn.fn is getattr(per_count, name).fn, name
        if hasattr(fn, "params"):  # a JITFunction (not the interpreter's, which specialises on nothing)
            flags = {p.name: p.do_not_specialize for p in fn.params}
            assert all(flags[a] for a in args), name
