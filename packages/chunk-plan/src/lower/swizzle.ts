// The intra-chunk swizzle of AutoOverlap §5.2: inside one wave, tiles are visited in
// Triton's grouped order (GROUP_SIZE_M rows at a time, column by column) so that
// consecutive programs share A rows and B columns in L2.

/** An output tile by its grid coordinates. */
export interface TileCoord {
  readonly pidM: number;
  readonly pidN: number;
}

/**
 * Order a wave's tiles in grouped order over the compact grid of the rows and columns
 * the wave touches: row groups of `groupSizeM`, and inside a group column-major, exactly
 * as Triton's `pid_m = first_pid_m + (pid % group_size_m)`, `pid_n = (pid % num_pid_in_group) // group_size_m`
 * visits a full grid. Rows or columns that lie outside the wave are skipped.
 */
export function groupedOrder(tiles: readonly TileCoord[], groupSizeM: number): TileCoord[] {
  const rows = [...new Set(tiles.map((t) => t.pidM))].sort((a, b) => a - b);
  const cols = [...new Set(tiles.map((t) => t.pidN))].sort((a, b) => a - b);
  const rowIndex = new Map(rows.map((m, i) => [m, i]));
  const colIndex = new Map(cols.map((n, i) => [n, i]));
  const key = (t: TileCoord): [number, number, number] => {
    const lm = rowIndex.get(t.pidM) ?? 0;
    return [Math.floor(lm / groupSizeM), colIndex.get(t.pidN) ?? 0, lm];
  };
  return [...tiles].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    return ka[0] - kb[0] || ka[1] - kb[1] || ka[2] - kb[2];
  });
}
