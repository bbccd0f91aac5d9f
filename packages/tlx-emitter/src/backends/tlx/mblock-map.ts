// Per-m-block index maps of TLX kernels (TileLink §4.1): the visit order and a chunk's wait or
// notify slot, one int per m-block on each rank. As in a transformed body (`compile/maps.ts`),
// a map that is one expression over (m-block, rank) is printed inline and any other is a
// per-rank table the kernel loads; the manifest's tile program carries the same maps for the
// CPU emulation. A table load at the top of a tile costs the TLX kernels up to 5% at world 8
// (evidence: `results/runs/tlx-backend-h100-2026-11-26`), an inline expression nothing.
import { freeVariables, mapToPython, type IndexMap } from "@ovl/mapping";
import { RANK_VAR, rankMap, type BuiltMap } from "../../schedule/maps.js";
import { DOMAIN_VARIABLE } from "../../local/program.js";
import type { KernelArg } from "../../core/manifest/schema.js";
import type { PythonWriter } from "../../core/writer/index.js";

/** The variable every per-m-block map is over (the m-block, or the visit row for the order): a transformed consumer's. */
export const MBLOCK_VAR = DOMAIN_VARIABLE.consumer;

/**
 * `perRank[r][m]` as a map over (`ovl_m`, `ovl_rank`): an expression when one fits every rank,
 * else the per-rank table `table` (also the kernel parameter the table is passed as).
 * @throws {EmitError} `bad-schedule` for tables of different or zero length.
 */
export function mblockMap(table: string, perRank: readonly (readonly number[])[]): BuiltMap {
  return rankMap(table, perRank, MBLOCK_VAR);
}

/** The kernel parameters reading `map` needs: its table, or `ovl_rank` when the expression uses the rank. */
export function mblockArgs(map: IndexMap): string[] {
  if (map.kind === "dynamic") return [map.table.name];
  return freeVariables(map.expr).includes(RANK_VAR) ? [RANK_VAR] : [];
}

/** Writes `target = map(index)`: `ovl_m` bound to `index`, then the map as Triton (inline, or a table load). */
export function writeMblockRead(w: PythonWriter, target: string, map: IndexMap, index: string): void {
  if (index !== MBLOCK_VAR) w.line(`${MBLOCK_VAR} = ${index}`);
  w.line(`${target} = ${mapToPython(map, { dialect: "triton" })}`);
}

/** The manifest arguments of the parameters `mblockArgs` names for `maps`: their tables and the rank. */
export function mblockKernelArgs(maps: readonly BuiltMap[]): Record<string, KernelArg> {
  const out: Record<string, KernelArg> = {};
  for (const { map } of maps) {
    for (const a of mblockArgs(map)) out[a] = a === RANK_VAR ? { kind: "rank" } : { kind: "table", name: a };
  }
  return out;
}
