"""One compiled sequence-parallel attention for every sequence length of a range (``ovl emit ag-attention
--any-rows``): the manifest is made concrete at each length S (``load_manifest(rows=S)``) and the same emitted kernel
runs correctly in both CPU engines (numpy and the Triton interpreter) at lengths it was not described at, causal and
not; a length outside the range is refused by name; the rows operator runs the plain path (the group's all-gather of
K/V, then scaled_dot_product_attention) outside its range and refuses bad input before anything runs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from builders import CLI

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime.errors import UsageError

pytestmark = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")

WORLD, HEADS, KV_HEADS, D = 2, 2, 1, 16
#: Lengths the operator was not described at (128): odd multiples of 16 rows a rank, off kv-block boundaries.
LENGTHS = (66, 130, 202)


def emit(tmp_path_factory: pytest.TempPathFactory, causal: bool) -> Path:
    """Attention over 2 ranks (2 heads sharing 1 kv head, head dim 16, 16x16 blocks, two chunks a rank: each rank
    needs 33 positions, so the range starts at 66) compiled once for every length up to 256."""
    out = tmp_path_factory.mktemp(f"attn-any-{'causal' if causal else 'full'}")
    cmd = ["node", str(CLI), "emit", "ag-attention", "--seq", "128", "--heads", str(HEADS), "--kv-heads", str(KV_HEADS)]
    cmd += ["--head-dim", str(D), "--world", str(WORLD), "--tile", "16x16", *(["--causal"] if causal else [])]
    cmd += ["--any-rows", "--max-rows", "256", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out / "manifest.json"


@pytest.fixture(scope="module", params=[True, False], ids=["causal", "full"])
def any_length(request, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emit(tmp_path_factory, request.param)


def test_the_manifest_serves_a_range_of_lengths(any_length):
    m = load_manifest(any_length, symbolic=True)
    assert m.rows is not None and (m.rows.min, m.rows.max, m.rows.multiple, m.rows.at) == (66, 256, 2, 128)
    assert (m.rows.fallback_below is None) == (m.rows.fallback_reason is None)
    args = dict(m.kernels[0].args)
    assert {n for n, a in args.items() if a.kind == "rows"} == {"SQ", "SKV", "ovl_rows"}
    assert set(m.rows_args) == set() and load_manifest(any_length, rows=130).rows_args == {"SQ", "SKV", "ovl_rows"}


@pytest.mark.parametrize("S", LENGTHS)
def test_one_kernel_is_correct_at_lengths_it_was_not_compiled_at_in_the_numpy_engine(any_length, S):
    m = load_manifest(any_length, rows=S)
    assert m.reference.M == S and m.reference.rows_per_rank == S // WORLD
    args = {n: a.value for n, a in m.kernels[0].args if a.kind == "int"}
    assert (args["SQ"], args["SKV"], args["ovl_rows"]) == (S // WORLD, S, S)
    out = emulate(m, epochs=2, seed=S, engine="numpy")
    assert out.ok and out.failures == [] and len(out.checks) == 2


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("S", LENGTHS)
def test_one_kernel_is_correct_at_lengths_it_was_not_compiled_at_in_the_interpreter(any_length, S):
    m = load_manifest(any_length, rows=S)
    out = emulate(m, epochs=1, seed=S + 1, engine="interpret")
    assert out.ok and out.failures == [], out.failures
    # The same emitted source at every length: the length comes in as ovl_rows, SQ and SKV.
    assert "ovl_rows" in (any_length.parent / m.kernels[0].source).read_text()


def test_groups_that_skip_a_block_at_some_length_fail_in_both_engines(any_length, tmp_path):
    d = json.loads(any_length.read_text())
    # Rank 1's last group ends a block early at every length: a kv block is never read.
    ends = d["rows"]["tables"]["ovl_kv_group_start"][1]
    ends[-1] = {"op": "add", "args": [ends[-1], {"op": "const", "value": -1}]}
    (tmp_path / "manifest.json").write_text(json.dumps(d))
    for k in d["kernels"]:
        shutil.copy(any_length.parent / k["source"], tmp_path / k["source"])
    m = load_manifest(tmp_path / "manifest.json", rows=130)
    out = emulate(m, epochs=1, seed=5, engine="numpy")
    assert any("never reads kv blocks" in str(f) for f in out.failures), out.failures
    if interpret_unavailable() is None:
        out = emulate(m, epochs=1, seed=5, engine="interpret")
        assert out.failures or not all(c.ok for c in out.checks)


@pytest.mark.parametrize(("S", "why"), [(257, "multiples of 2"), (512, "66..256"), (64, "66..256")])
def test_a_length_outside_the_range_is_refused_by_name(any_length, S, why):
    with pytest.raises(UsageError, match=why):
        load_manifest(any_length, rows=S)


def test_the_rows_operator_overlaps_in_its_range_runs_the_plain_path_outside_and_refuses_bad_input(any_length):
    torch = pytest.importorskip("torch")
    from ovl_runtime._runner.rows import RowsOperator
    from ovl_runtime.groups import EmulatedGroup
    from ovl_runtime.operators.ag_attention.spec import attention_spec, torch_attention

    m = load_manifest(any_length, symbolic=True)
    a = attention_spec(m)
    op = RowsOperator(m, EmulatedGroup(WORLD))
    gen = torch.Generator().manual_seed(9)
    for S in (130, 32, 300):  # one in the range, one below it, one above it
        s = S // WORLD
        q = torch.randn(WORLD, s, HEADS * D, generator=gen)
        kv = torch.randn(WORLD, s, 2 * KV_HEADS * D, generator=gen)
        out = torch.empty(WORLD, s, HEADS * D)
        op.run({"Q": q, "KV": kv}, out)
        want = torch.stack([torch_attention(q[r], kv.reshape(S, -1), a, r * s) for r in range(WORLD)])
        assert ((out - want).norm() / want.norm()).item() < 1e-4, S
        overlaps = m.rows is not None and m.rows.serves(S) and (m.rows.fallback_below is None or S >= m.rows.fallback_below)
        assert (op.path(S) == "overlapped") == overlaps
    assert op.path(32).startswith("not overlapped: 32 rows are outside the 66..256")
    assert op.describe()["calls"] == 3 and op.describe()["notOverlapped"] >= 2
    bad = [(torch.randn(WORLD, 0, HEADS * D), "0 rows"), (torch.randn(WORLD, 65, HEADS * D, dtype=torch.float64), "Q is torch.float64")]
    for q, why in bad:
        with pytest.raises(UsageError, match=why):
            op.run({"Q": q, "KV": torch.randn(WORLD, q.shape[1], 2 * KV_HEADS * D)}, torch.empty(WORLD, max(1, q.shape[1]), HEADS * D))
    assert op.describe()["calls"] == 3
    op.close()
