// The row → wait map of a consumer that gathers rows through an index table (ag-moe): per
// rank, which chunk slots each row of the gathered tensor waits on, cut into segments of rows
// with the same slots on every rank. A segment's index is nondecreasing in the row, so a
// block whose rows lie in [first, last] waits on exactly the segments seg(first)..seg(last),
// which cover every row it reads (and only chunks those rows meet).
import { dynamicMap, evaluateMap, floorDiv, lookupTable, staticMap, variable, type IndexMap } from "@ovl/mapping";
import { GATHER_VARIABLES } from "../../local/index.js";
import { EmitError } from "../../core/writer/index.js";
import { rankMap, type BuiltMap } from "../../schedule/maps.js";

/** Rows cut into segments, and each rank's slot columns per segment. */
export interface RowSegments {
  /** First row of each segment: `starts[0] = 0`, ascending; segment s is `[starts[s], starts[s+1])`. */
  readonly starts: readonly number[];
  /** Rows in all. */
  readonly rows: number;
  /** `slots[rank][j][s]`: the j-th slot segment s waits on, on that rank (-1 = none). */
  readonly slots: readonly (readonly (readonly number[])[])[];
}

/**
 * Segments of `perRank[rank][j][row]` (each rank's slot columns per row, as
 * `consumerColumns` gives them for one-row blocks): a segment ends where any rank's slots
 * change.
 * @throws {EmitError} `bad-schedule` for ranks or columns of different lengths, or no rows.
 */
export function rowSegments(perRank: readonly (readonly (readonly number[])[])[]): RowSegments {
  const rows = perRank[0]?.[0]?.length ?? 0;
  if (rows === 0) throw new EmitError("bad-schedule", "a gathered tensor's row → slot map needs at least one row and one column");
  const width = Math.max(...perRank.map((cols) => cols.length));
  for (const [r, cols] of perRank.entries()) {
    if (cols.some((c) => c.length !== rows))
      throw new EmitError("bad-schedule", `rank ${r}: every slot column needs one entry per row (${rows})`);
  }
  const at = (r: number, j: number, row: number) => perRank[r]?.[j]?.[row] ?? -1;
  const starts = [0];
  for (let row = 1; row < rows; row++) {
    const changes = perRank.some((_, r) => Array.from({ length: width }, (_, j) => j).some((j) => at(r, j, row) !== at(r, j, row - 1)));
    if (changes) starts.push(row);
  }
  return {
    starts,
    rows,
    slots: perRank.map((_, r) => Array.from({ length: width }, (_, j) => starts.map((s) => at(r, j, s)))),
  };
}

/** The segment of each row, in row order. */
export function segmentOfRows(seg: RowSegments): number[] {
  const out = new Array<number>(seg.rows);
  seg.starts.forEach((s, i) => out.fill(i, s, seg.starts[i + 1] ?? seg.rows));
  return out;
}

/**
 * The row → segment map over "ovl_row": `ovl_row // L` when every segment but the last is L
 * rows (the last at most L), else the table `tableName` (the same on every rank). Checked
 * against the segments row by row.
 * @throws {EmitError} `bad-schedule` if the map disagrees with the segments (never for a
 *   correct recovery) or is not nondecreasing.
 */
export function segmentMap(seg: RowSegments, world: number, tableName: string): BuiltMap {
  const want = segmentOfRows(seg);
  const row = variable(GATHER_VARIABLES.row, { min: 0, max: seg.rows - 1 });
  const L = seg.starts[1] ?? seg.rows;
  const equal = seg.starts.every((s, i) => s === i * L) && seg.rows - (seg.starts[seg.starts.length - 1] as number) <= L;
  const built: BuiltMap = equal
    ? { map: staticMap(floorDiv(row, L)) }
    : {
        map: dynamicMap(lookupTable(tableName, seg.rows), row),
        table: { name: tableName, dtype: "int32", values: Array.from({ length: world }, () => [...want]) },
      };
  const values = built.table?.values[0];
  for (let r = 0; r < seg.rows; r++) {
    const got = values === undefined ? evaluateMap(built.map, { [GATHER_VARIABLES.row]: r }) : (values[r] as number);
    if (got !== want[r] || (r > 0 && got < (want[r - 1] as number))) {
      throw new EmitError(
        "bad-schedule",
        `row ${r} maps to segment ${got}, not ${want[r]}: the segment map must be nondecreasing in the row`,
      );
    }
  }
  return built;
}

/** Each slot column as a map over "ovl_seg" (an expression over (segment, rank) where one fits). */
export function segmentSlotMaps(seg: RowSegments, tablePrefix: string): BuiltMap[] {
  const width = seg.slots[0]?.length ?? 0;
  return Array.from({ length: width }, (_, j) =>
    rankMap(
      `${tablePrefix}${j}`,
      seg.slots.map((cols) => cols[j] as number[]),
      GATHER_VARIABLES.segment,
    ),
  );
}

/**
 * The slots a block reading rows `first..last` waits on, on `rank`: every slot of the
 * segments `seg(first)..seg(last)` (what the inserted code does), for tests and the numpy engine.
 */
export function segmentWaits(seg: RowSegments, segmentOf: (row: number) => number, rank: number, first: number, last: number): Set<number> {
  const out = new Set<number>();
  for (let s = segmentOf(first); s <= segmentOf(last); s++)
    for (const col of seg.slots[rank] ?? []) if ((col[s] ?? -1) >= 0) out.add(col[s] as number);
  return out;
}

/** `map` of a segment map, evaluated at `row` (a static map or the table of `built`). */
export function segmentAt(built: BuiltMap, row: number): number {
  const values = built.table?.values[0];
  return values === undefined ? evaluateMap(built.map as IndexMap, { [GATHER_VARIABLES.row]: row }) : (values[row] as number);
}
