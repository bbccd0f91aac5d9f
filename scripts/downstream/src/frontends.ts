// @ovl/frontends README: a change of sharding spec lowered to a chunk plan that validates.
import { validatePlan } from "@ovl/chunk-plan";
import { FrontendError, lowerReshard, partialSum, replicate, shard } from "@ovl/frontends";
import { holds, same } from "./check.js";

const X = { name: "X", shape: [4096, 1024], dtype: "bf16" as const };

// Sharded rows → replicated: an AllGather, lowered with the ring template.
const ag = lowerReshard({ tensor: X, mesh: [8], before: [shard(0)], after: [replicate()], path: "template" });
same([ag.implied.kind, validatePlan(ag.plan).ok], ["all-gather", true], "AllGather");

// Partial sums → sharded rows: a ReduceScatter.
const rs = lowerReshard({ tensor: X, mesh: [8], before: [partialSum()], after: [shard(0)] });
same([rs.implied.kind, validatePlan(rs.plan).ok], ["reduce-scatter", true], "ReduceScatter");

// Replicated → partial sums is no collective: a FrontendError with its code.
try {
  lowerReshard({ tensor: X, mesh: [8], before: [replicate()], after: [partialSum()] });
  throw new Error("an impossible reshard was lowered");
} catch (e) {
  holds(e instanceof FrontendError, "FrontendError");
  holds(typeof e.code === "string" && e.code.length > 0, "with a code");
}
console.log("@ovl/frontends: README example ok");
