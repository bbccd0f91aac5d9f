// From a tile schedule's per-visit tables to the per-m-block tables the row-blocked GEMM
// templates read: the m-block visit order (first visit of each row block) and one slot per
// m-block, refusing schedules whose tiles in one row block disagree.
import type { RankTileSchedule } from "@ovl/chunk-plan";
import { EmitError } from "../core/writer/index.js";

/** Per-m-block tables of one rank. */
export interface MBlockTables {
  /** m-blocks in the order the schedule first visits them (a permutation of `0..numPidM-1`). */
  readonly order: number[];
  /** Per m-block, the one slot its tiles wait on or notify (`-1` = none). */
  readonly slot: number[];
  /** Per m-block, that slot's arrivals (0 where `-1`). */
  readonly arrivals: number[];
}

/**
 * Reduce one rank's tables to per-m-block tables. `columns` are the wait (consumer) or
 * notify (producer) slot columns; `arrivalColumns` the matching arrivals (producer: from
 * the rank's slot list). Every tile of an m-block must name the same single slot.
 * @throws {EmitError} `bad-schedule` when a tile names two slots, tiles of one m-block
 *   name different slots, or the visit order misses or repeats an m-block.
 */
export function mBlockTables(
  rank: RankTileSchedule,
  numPidM: number,
  columns: readonly (readonly number[])[],
  arrivalOf: (slot: number, visit: number) => number,
): MBlockTables {
  const { pidM } = rank.tables;
  const slot = new Array<number | undefined>(numPidM).fill(undefined);
  const arrivals = new Array<number>(numPidM).fill(0);
  const order: number[] = [];
  const seen = new Set<number>();
  pidM.forEach((m, v) => {
    if (!Number.isInteger(m) || m < 0 || m >= numPidM) {
      throw new EmitError("bad-schedule", `rank ${rank.rank}: visit ${v} names m-block ${m}, outside 0..${numPidM - 1}`);
    }
    if (!seen.has(m)) {
      seen.add(m);
      order.push(m);
    }
    const named = columns.map((col) => col[v] ?? -1).filter((s) => s >= 0);
    if (named.length > 1) {
      throw new EmitError(
        "bad-schedule",
        `rank ${rank.rank}: tile at visit ${v} (m-block ${m}) names slots ${named.join(", ")}; the row-blocked GEMM templates take one slot per m-block: cut chunks on multiples of BLOCK_M`,
      );
    }
    const s = named[0] ?? -1;
    const prev = slot[m];
    if (prev !== undefined && prev !== s) {
      throw new EmitError(
        "bad-schedule",
        `rank ${rank.rank}: m-block ${m} has tiles on slots ${prev} and ${s}; the row-blocked GEMM templates need every tile of an m-block on one slot (cut chunks along rows)`,
      );
    }
    slot[m] = s;
    if (s >= 0) arrivals[m] = arrivalOf(s, v);
  });
  if (order.length !== numPidM) {
    throw new EmitError("bad-schedule", `rank ${rank.rank}: the schedule visits ${order.length} of ${numPidM} m-blocks`);
  }
  return { order, slot: slot.map((s) => s ?? -1), arrivals };
}
