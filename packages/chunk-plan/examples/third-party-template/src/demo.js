// Builds a small bidirectional ring plan, proves it with the package's validator and
// prints its text dump: `pnpm demo` once the example is wired into the workspace.
import { dumpPlan, validatePlan } from "@ovl/chunk-plan";
import { allGatherBidirectionalRing } from "./index.js";

const plan = allGatherBidirectionalRing({
  tensor: { name: "A", shape: [16, 8], dtype: "bf16" },
  axis: 0,
  mesh: [4],
  split: 2,
});
const result = validatePlan(plan);
if (!result.ok) {
  for (const e of result.errors) console.error(`${e.code}: ${e.message}`);
  process.exit(1);
}
process.stdout.write(dumpPlan(plan));
