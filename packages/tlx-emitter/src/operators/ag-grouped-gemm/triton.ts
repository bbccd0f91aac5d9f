// AllGather + grouped GEMM from a local kernel (the MoE expert GEMM; TileLink's
// AG+Gather+GroupGEMM): the shared consumer path (`consumer.ts`) with B [E, K, N] and the
// routing as a table of the expert of every global m-block, which the body reads.
import type { TileSchedule } from "@ovl/chunk-plan";
import type { EmitResult } from "../../core/result.js";
import { rowShards } from "../../backends/triton/common.js";
import { resolveOptions } from "../../core/options.js";
import { EmitError } from "../../core/writer/index.js";
import { compileConsumer } from "../../backends/triton/consumer.js";
import type { ExpertRouting, Operator } from "../../core/operator.js";

/** Name of the routing table in the manifest (the body's `group_of_mblock` parameter by default). */
export const GROUP_TABLE = "group_of_mblock";
/** Manifest buffers of the experts' weights `[E, K, N]` and of the output `[M, N]`. */
export const MOE_B = "moe_b";
export const MOE_C = "moe_c";

/**
 * Checks a routing against the problem: one expert per global m-block (`M / BLOCK_M`
 * entries, M a multiple of BLOCK_M), each an integer in `[0, experts)`. Experts without
 * m-blocks are allowed.
 * @throws {EmitError} `bad-param` naming the first fault.
 */
export function checkRouting(groups: ExpertRouting | undefined, M: number, BM: number): ExpertRouting {
  if (groups === undefined) {
    throw new EmitError(
      "bad-param",
      "an ag-grouped-gemm operator needs groups: { experts, mblockExpert } (the expert of every global m-block)",
    );
  }
  const { experts, mblockExpert } = groups;
  if (!Number.isInteger(experts) || experts < 1)
    throw new EmitError("bad-param", `groups.experts must be a positive integer, got ${experts}`);
  if (M % BM !== 0) {
    throw new EmitError(
      "bad-param",
      `grouped GEMM: M (${M}) must be a multiple of BLOCK_M (${BM}); pad every expert's rows to BLOCK_M so an m-block belongs to one expert`,
    );
  }
  if (mblockExpert.length !== M / BM) {
    throw new EmitError(
      "bad-param",
      `groups.mblockExpert has ${mblockExpert.length} entries; it needs one per m-block, M / BLOCK_M = ${M} / ${BM} = ${M / BM}`,
    );
  }
  mblockExpert.forEach((e, m) => {
    if (!Number.isInteger(e) || e < 0 || e >= experts) {
      throw new EmitError("bad-param", `groups.mblockExpert[${m}] = ${e}: an expert must be an integer in [0, ${experts})`);
    }
  });
  return groups;
}

/**
 * Compile an AllGather+grouped GEMM operator: `op.plan` gathers A's rows (any AllGather
 * template; each rank's shard already grouped by expert and padded to BLOCK_M per group),
 * the body computes, per m-block `mb`, `C[rows of mb] = A[rows of mb] @ B[groups.mblockExpert[mb]]`.
 * The routing is the manifest table `group_of_mblock` (the same on every rank), bound to the
 * body's parameter of that name or to the one `op.bind` names with
 * `{ kind: "arg", arg: { kind: "table", name: "group_of_mblock" } }`.
 * @throws {EmitError} `bad-param` for a missing or bad routing or a body that reads no
 *   routing table, and as `compileAgGemm` does.
 */
export async function compileAgGroupedGemm(op: Operator, schedule?: TileSchedule): Promise<EmitResult> {
  const { M, N, K } = op.problem;
  const { experts, mblockExpert } = checkRouting(op.groups, M, op.tile.BM);
  const dtype = resolveOptions(op.options ?? {}).dtype;
  const table = { kind: "table" as const, name: GROUP_TABLE };
  return compileConsumer(
    op,
    {
      operator: "ag-grouped-gemm",
      title: "AllGather+grouped GEMM",
      b: { name: MOE_B, shape: [experts, K, N], dtype, symmetric: false, init: "random" },
      c: { name: MOE_C, shape: [M, N], dtype, symmetric: false, init: "poison" },
      tables: (world) => [{ name: GROUP_TABLE, dtype: "int32", values: Array.from({ length: world }, () => [...mblockExpert]) }],
      byName: { [GROUP_TABLE]: { kind: "arg", arg: table } },
      checkBindings(own, entry) {
        const reads = [...own.values()].some((b) => b.kind === "arg" && b.arg.kind === "table" && b.arg.name === GROUP_TABLE);
        if (!reads) {
          throw new EmitError(
            "bad-param",
            `${op.body.path}: no parameter of ${entry} reads the routing table: name it ${GROUP_TABLE} or pass bind: { <param>: { kind: "arg", arg: { kind: "table", name: "${GROUP_TABLE}" } } }`,
          );
        }
      },
      params: { groups: GROUP_TABLE, experts },
      reference: (a, world, tolerance) => ({
        operator: "ag-grouped-gemm",
        M,
        N,
        K,
        inputs: { A: a, B: MOE_B },
        groupTable: GROUP_TABLE,
        output: MOE_C,
        ...rowShards(M, world),
        tolerance,
      }),
    },
    schedule,
  );
}
