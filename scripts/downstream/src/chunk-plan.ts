// @ovl/chunk-plan README: plan an AllGather from a template, validate it, lower it against a
// GEMM's tiling and check the tile schedule.
import {
  allGatherSwizzle,
  assertValidPlan,
  type ChunkPlan,
  checkTileSchedule,
  dumpPlan,
  InvalidPlanError,
  lowerToTileSchedule,
  parsePlan,
  planSignals,
  serializePlan,
  type TileSchedule,
  validatePlan,
} from "@ovl/chunk-plan";
import { holds, same } from "./check.js";

// AllGather of A [8192 × 4096] bf16 over 4 ranks, each transfer cut in 2 chunks (rank-rotated pulls).
export const plan: ChunkPlan = planSignals(
  allGatherSwizzle({ tensor: { name: "A", shape: [8192, 4096], dtype: "bf16" }, axis: 0, mesh: [4], split: 2 }),
);
same(validatePlan(plan), { ok: true }, "the template's plan validates");
holds(dumpPlan(plan).includes("pull"), "dumpPlan prints the pulls");

// The consumer GEMM (A @ B, B: [4096 × 2752]) with 128×256×64 tiles on 132 SMs.
export const schedule: TileSchedule = lowerToTileSchedule(plan, {
  tensor: "A",
  problem: { M: 8192, N: 2752, K: 4096 },
  tile: { BM: 128, BN: 256, BK: 64 },
  groupSizeM: 8,
  persistent: { numSms: 132 },
});
same(checkTileSchedule(schedule, plan), [], "every tile once, waits exactly on the chunks it reads");

// The JSON format round-trips, and a broken plan is a typed error naming what is wrong.
same(parsePlan(JSON.parse(serializePlan(plan))), plan, "serialize / parse round trip");
const rank0 = plan.ranks[0]!;
const broken: ChunkPlan = { ...plan, ranks: [{ ...rank0, streams: [] }, ...plan.ranks.slice(1)] };
const result = validatePlan(broken);
holds(!result.ok, "a plan missing rank 0's transfers fails validation");
holds(result.errors.length > 0, "with errors");
try {
  assertValidPlan(broken);
  throw new Error("assertValidPlan passed a broken plan");
} catch (e) {
  holds(
    e instanceof InvalidPlanError && e.code === "invalid-plan" && e.errors.length > 0,
    "InvalidPlanError carries its code and findings",
  );
}
console.log("@ovl/chunk-plan: README example ok");
