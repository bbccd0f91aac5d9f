"""Row shards of a manifest's reference: which global rows of M each rank holds.

Row-sharded operands and results (the gathered ``A`` of AG+GEMM, a ReduceScatter's result)
are cut along M. ``reference.rowsPerRank`` states equal shards (rank r holds rows
``r × rowsPerRank`` onward); ``reference.rowCounts`` states uneven ones, one count per rank
in rank order (the emitter cuts the balanced partition: the first ``M mod world`` ranks one
row more), rank r holding rows from the sum of the counts before it
(``ReferenceSpec.row_counts``).
"""

from __future__ import annotations

from ..errors import ManifestError
from .types import Manifest

#: Operators whose inputs or output are row-sharded over the ranks.
ROW_SHARDED = ("ag-gemm", "gemm-rs", "all-gather", "reduce-scatter", "ag-grouped-gemm", "ag-moe", "ag-attention", "moe-rs")


def _stated_counts(m: Manifest) -> tuple[int, ...] | None:
    return m.reference.row_counts


def row_counts(m: Manifest) -> tuple[int, ...]:
    """The rows each rank holds, rank by rank: ``rowCounts``, or ``rowsPerRank`` for every
    rank, or all M rows on every rank when the reference states neither (an operator whose
    operands are not row-sharded)."""
    counts = _stated_counts(m)
    if counts is not None:
        return counts
    rpr = m.reference.rows_per_rank
    return tuple(rpr if rpr is not None else m.reference.M for _ in range(m.world))


def rank_rows(m: Manifest, rank: int) -> tuple[int, int]:
    """``(first global row, rows)`` of ``rank``'s shard."""
    if _stated_counts(m) is None and m.reference.rows_per_rank is None:
        return 0, m.reference.M
    counts = row_counts(m)
    return sum(counts[:rank]), counts[rank]


def check_row_shards(m: Manifest) -> None:
    """A row-sharded operator's reference states its shards once and they tile M.

    @raises ManifestError at ``reference.rowsPerRank`` or ``reference.rowCounts`` naming what
    to write instead.
    """
    ref = m.reference
    if ref.operator not in ROW_SHARDED:
        return
    counts = _stated_counts(m)
    if counts is None:
        if ref.rows_per_rank is None or ref.rows_per_rank * m.world != ref.M:
            raise ManifestError(
                "reference.rowsPerRank",
                f"{ref.operator} needs rowsPerRank with rowsPerRank x world = M ({ref.M}), "
                f"or rowCounts (the rows of each of the {m.world} ranks, summing to M) when M is not a multiple of the world",
            )
        return
    if ref.rows_per_rank is not None:
        raise ManifestError("reference.rowCounts", "give rowsPerRank (equal shards) or rowCounts (uneven shards), not both")
    if len(counts) != m.world or sum(counts) != ref.M:
        raise ManifestError(
            "reference.rowCounts",
            f"needs one row count per rank ({m.world}) summing to M ({ref.M}); got {len(counts)} counts summing to {sum(counts)}",
        )
