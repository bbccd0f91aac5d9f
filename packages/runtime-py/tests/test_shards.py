"""Uneven row shards (M not a multiple of the world): the reference states them as
``rowCounts``, the checks accept exactly one consistent statement, and the numpy references
gather and scatter each rank's own rows."""

import copy

import builders
import numpy as np
import pytest

from ovl_runtime import ManifestError, parse_manifest
from ovl_runtime._manifest.shards import rank_rows, row_counts
from ovl_runtime._reference.on_cpu import output_view, references


def _uneven(d, counts):
    d = copy.deepcopy(d)
    d["reference"].pop("rowsPerRank", None)
    d["reference"]["rowCounts"] = counts
    return d


def test_row_counts_place_each_rank_after_the_ranks_before_it():
    m = parse_manifest(_uneven(builders.ag_gemm(world=2, M=128), [65, 63]))
    assert row_counts(m) == (65, 63)
    assert [rank_rows(m, r) for r in range(2)] == [(0, 65), (65, 63)]
    even = parse_manifest(builders.ag_gemm(world=2, M=128))
    assert [rank_rows(even, r) for r in range(2)] == [(0, 64), (64, 64)]


BAD = [
    ([64, 63], "summing to M"),
    ([128], "one row count per rank"),
    ([130, -2], "positive"),
]


@pytest.mark.parametrize("counts,says", BAD, ids=["sum", "length", "negative"])
def test_row_counts_must_tile_m_rank_by_rank(counts, says):
    with pytest.raises(ManifestError) as err:
        parse_manifest(_uneven(builders.ag_gemm(world=2, M=128), counts))
    assert err.value.path == "reference.rowCounts" and says in str(err.value)


def test_a_reference_states_its_shards_once():
    d = _uneven(builders.ag_gemm(world=2, M=128), [65, 63])
    d["reference"]["rowsPerRank"] = 64
    with pytest.raises(ManifestError, match="not both") as err:
        parse_manifest(d)
    assert err.value.path == "reference.rowCounts"
    d = builders.ag_gemm(world=2, M=128)
    del d["reference"]["rowsPerRank"]
    with pytest.raises(ManifestError, match="rowCounts") as err:
        parse_manifest(d)
    assert err.value.path == "reference.rowsPerRank"


COUNTS = [33, 32, 31]  # M = 96 over 3 ranks, uneven on purpose


def _rows(rng, world, M, cols):
    return [rng.standard_normal((M, cols)) for _ in range(world)]


def test_all_gather_concatenates_each_ranks_own_rows():
    m = parse_manifest(_uneven(builders.all_gather_pull(world=3, M=96), COUNTS))
    rng = np.random.default_rng(1)
    N = m.reference.N
    shards = [rng.standard_normal((c, N)) for c in COUNTS]  # each rank's buffer holds its rows only
    refs = references(m, [{"X": s} for s in shards])
    for r in range(3):
        np.testing.assert_array_equal(refs[r], np.concatenate(shards))


def test_reduce_scatter_gives_each_rank_its_rows_of_the_sum():
    m = parse_manifest(_uneven(builders.reduce_scatter_ring(world=3, M=96), COUNTS))
    rng = np.random.default_rng(2)
    xs = _rows(rng, 3, 96, m.reference.N)
    refs = references(m, [{"X": x} for x in xs])
    total = sum(xs)
    starts = [0, 33, 65]
    for r in range(3):
        np.testing.assert_allclose(refs[r], total[starts[r] : starts[r] + COUNTS[r]])
        # An output buffer of the whole M rows is read at the rank's rows; one of its rows only, whole.
        whole = np.arange(96 * m.reference.N, dtype=np.float64).reshape(96, -1)
        np.testing.assert_array_equal(output_view(m, whole, r), whole[starts[r] : starts[r] + COUNTS[r]])
        own = whole[: COUNTS[r]]
        np.testing.assert_array_equal(output_view(m, own, r), own)


def test_gemm_rs_and_ag_gemm_read_uneven_shards():
    rng = np.random.default_rng(3)
    rs = parse_manifest(_uneven(builders.gemm_rs(world=3, M=96, K=32, N=64, BM=16, BN=32), COUNTS))
    K, N = rs.reference.K, rs.reference.N
    a = [rng.standard_normal((96, K)) for _ in range(3)]
    b = [rng.standard_normal((K, N)) for _ in range(3)]
    refs = references(rs, [{"A": a[r], "B": b[r]} for r in range(3)])
    total = sum(a[r] @ b[r] for r in range(3))
    np.testing.assert_allclose(refs[2], total[65:96])
    ag = parse_manifest(_uneven(builders.ag_gemm(world=3, M=96, BM=16, split=2), COUNTS))
    K, N = ag.reference.K, ag.reference.N
    full = rng.standard_normal((96, K))
    bb = rng.standard_normal((K, N))
    # Each rank's A holds all M rows, only its own shard's rows meaningful (junk elsewhere).
    starts = [0, 33, 65]
    inputs = []
    for r in range(3):
        own = np.zeros((96, 1), dtype=bool)
        own[starts[r] : starts[r] + COUNTS[r]] = True
        inputs.append({"A": np.where(own, full, rng.standard_normal((96, K)) * 1e6), "B": bb})
    refs = references(ag, inputs)
    for r in range(3):
        np.testing.assert_allclose(refs[r], full @ bb)
