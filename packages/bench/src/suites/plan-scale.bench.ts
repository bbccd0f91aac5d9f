// Scale of chunk-plan planning and validation (AutoOverlap §5.1): a hierarchical 2-D
// AllGather (mesh [world/8, 8], split 4) is built with the library's template and proven
// by validatePlan (structure, writes, deadlock and race checks, symbolic execution) at 64,
// 256 and 1024 ranks. Reports ops per plan and milliseconds per phase.
import { allGatherHierarchical, validatePlan, type ChunkPlan } from "@ovl/chunk-plan";
import { measure, type Measurement, type SuiteResult } from "../harness.js";

const WORLDS = [64, 256, 1024];
const SPLIT = 4;
const GPUS_PER_NODE = 8;
/** Rows per rank's shard: every chunk of a split-4 shard holds whole 2 KiB rows. */
const ROWS_PER_RANK = 16;
const COLS = 1024;

function plan(world: number): ChunkPlan {
  return allGatherHierarchical({
    tensor: { name: "x", shape: [world * ROWS_PER_RANK, COLS], dtype: "bf16" },
    axis: 0,
    mesh: [world / GPUS_PER_NODE, GPUS_PER_NODE],
    split: SPLIT,
  });
}

function opCount(p: ChunkPlan): number {
  let n = 0;
  for (const rp of p.ranks) for (const s of rp.streams) n += s.length;
  return n;
}

function validated(p: ChunkPlan): ChunkPlan {
  const result = validatePlan(p);
  if (!result.ok) throw new Error(`plan ${p.name} is invalid: ${result.errors[0]?.message ?? "?"}`);
  return p;
}

export default function run(): SuiteResult {
  const measurements: Measurement[] = [];
  for (const world of WORLDS) {
    const sample = validated(plan(world));
    const ops = opCount(sample);
    const extra = { ranks: world, mesh: `[${world / GPUS_PER_NODE}, ${GPUS_PER_NODE}]`, split: SPLIT, ops };
    // Large worlds take seconds per call: few iterations, one warm-up.
    const opts = { itemsPerIteration: ops, extra, warmup: 1, maxIterations: world >= 1024 ? 5 : 20, budgetMs: 4000 };
    measurements.push(measure(`plan: hierarchical AllGather, ${world} ranks`, () => plan(world), opts));
    measurements.push(measure(`validate: hierarchical AllGather, ${world} ranks`, () => validated(sample), opts));
    measurements.push(measure(`plan + validate: hierarchical AllGather, ${world} ranks`, () => validated(plan(world)), opts));
    console.error(`plan-scale: ${world} ranks, ${ops} ops done`);
  }
  return {
    suite: "plan-scale",
    description:
      "Planning (allGatherHierarchical) and validating (validatePlan: structure, exactly-once writes, deadlock and race checks, symbolic execution against the AllGather claim) a hierarchical AllGather on mesh [world/8, 8] with split 4; items are the plan's ops, so items/s is ops planned or validated per second.",
    measurements,
  };
}
