// What the direct and the hierarchical GEMM+ReduceScatter (and its any-row-count operator) share before their
// deliveries differ: the plan and producer schedule checked against each other, the GEMM's parameters, M cut into
// slabs of whole m-blocks, the producer's per-m-block tile-done tables, the push kernels' segment tables, and the
// manifest's reference.
import type { ChunkPlan, RankTileSchedule, TensorDecl, TileSchedule } from "@ovl/chunk-plan";
import { checkPlanAndSchedule } from "../../backends/triton/common.js";
import { checkGemmParams, checkNvshmemRows, type GemmParams } from "../../backends/triton/kernels/index.js";
import type { Table } from "../../core/manifest/schema.js";
import type { EmitOptions, ResolvedOptions } from "../../core/options.js";
import { EmitError } from "../../core/writer/index.js";
import { type MBlockTables, mBlockTables } from "../../schedule/m-block-tables.js";
import { GEMM_RS_BUFFERS } from "./buffers.js";

/** A checked GEMM+RS problem: the plan's world and partial tensor, the GEMM's shape and parameters, rows per slab. */
export interface RsProblem {
  readonly world: number;
  readonly tensor: TensorDecl;
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly params: GemmParams;
  readonly rowsPerRank: number;
}

/**
 * `plan` and its producer `schedule` checked against each other and against `o.dtype`, the GEMM's parameters
 * (`options.blockK` and `options.groupM` over the schedule's tiling) and M cut into `world` slabs of whole
 * m-blocks; `nearest`, where given, ends that refusal.
 * @throws {EmitError} `bad-schedule` / `bad-plan` for a plan and schedule that disagree, `bad-param` for slabs
 *   that are not whole m-blocks or bad GEMM parameters.
 */
export function rsProblem(plan: ChunkPlan, schedule: TileSchedule, options: EmitOptions, o: ResolvedOptions, nearest?: string): RsProblem {
  const { world, tensor } = checkPlanAndSchedule(plan, schedule, "producer");
  const { M, N, K } = schedule.tiling.problem;
  if (tensor.dtype !== o.dtype) throw new EmitError("bad-plan", `tensor ${tensor.name} is ${tensor.dtype} but options.dtype is ${o.dtype}`);
  const params = checkGemmParams({
    M,
    N,
    K,
    BLOCK_M: schedule.tiling.tile.BM,
    BLOCK_N: schedule.tiling.tile.BN,
    BLOCK_K: options.blockK ?? schedule.tiling.tile.BK,
    GROUP_M: options.groupM ?? schedule.tiling.groupSizeM,
  });
  if (M % world !== 0 || (M / world) % params.BLOCK_M !== 0) {
    throw new EmitError(
      "bad-param",
      `M (${M}) must be ${world} slabs of whole m-blocks of ${params.BLOCK_M} rows${nearest === undefined ? "" : `; ${nearest}`}`,
    );
  }
  return { world, tensor, M, N, K, params, rowsPerRank: M / world };
}

/**
 * The schedule's ranks in rank order and, per rank, its per-m-block tile-done tables (`mBlockTables` over the
 * notify slots, each slot's arrivals from the rank's slot list).
 * @throws {EmitError} as `mBlockTables`.
 */
export function producerTables(schedule: TileSchedule): { ranks: RankTileSchedule[]; tables: MBlockTables[] } {
  const ranks = schedule.ranks.slice().sort((a, b) => a.rank - b.rank);
  const tables = ranks.map((r) =>
    mBlockTables(r, schedule.grid.numPidM, r.tables.notifySlot, (slot) => r.slots.find((s) => s.slot === slot)?.arrivals ?? 0),
  );
  return { ranks, tables };
}

/**
 * A push kernel's segment table `name` (`sm-push`'s or `nvshmem-push`'s: seven int64 fields a row, `SM_PUSH_FIELDS`)
 * from each rank's `rows`, flattened; rows of length 0 with no wait and no notify pad every rank's table to one
 * length, `count` rows (at least one).
 */
export function segmentTable(name: string, rows: readonly (readonly (readonly number[])[])[]): { table: Table; count: number } {
  const count = Math.max(1, ...rows.map((r) => r.length));
  const values = rows.map((r) => [...r, ...Array.from({ length: count - r.length }, () => [0, 0, 0, 0, -1, 0, -1])].flat());
  return { table: { name, dtype: "int64", values }, count };
}

/** A row of `nvshmem-push`, its fields in order (`NVSHMEM_PUSH_FIELDS`). */
export type NvshmemRow = [number, number, number, number, number, number, number];

/** Padded, flattened, checked (`checkNvshmemRows` against `slots` int32 slots) `nvshmem-push` tables of every rank's rows. */
export function nvshmemPushTable(name: string, rows: readonly (readonly NvshmemRow[])[], slots: number): { table: Table; count: number } {
  const push = segmentTable(name, rows);
  for (const v of push.table.values) checkNvshmemRows(v, slots);
  return push;
}

/** The reference of a GEMM+RS manifest: `gemm_a` × `gemm_b` summed over the ranks, slab r of M rows into `rs_out`. */
export function gemmRsReference(M: number, N: number, K: number, rowsPerRank: number, tolerance: number) {
  return {
    operator: "gemm-rs" as const,
    M,
    N,
    K,
    inputs: { A: GEMM_RS_BUFFERS.a, B: GEMM_RS_BUFFERS.b },
    output: GEMM_RS_BUFFERS.out,
    rowsPerRank,
    tolerance,
  };
}
