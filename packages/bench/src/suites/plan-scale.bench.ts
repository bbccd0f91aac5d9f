// Scale of chunk-plan planning and validation (AutoOverlap §5.1): a hierarchical 2-D
// AllGather (mesh [world/8, 8], split 4) is built with the library's template and proven
// by validatePlan (structure, writes, deadlock and race checks, symbolic execution) at 64,
// 256 and 1024 ranks. Reports ops per plan and milliseconds per phase: planning, validating
// (an already built plan), both in a row, then the later stages of the pipeline for the same
// plan, signal allocation (planSignals) and lowering to a consumer tile schedule
// (lowerToTileSchedule, an AG+GEMM tiling of the gathered tensor).
import { allGatherHierarchical, lowerToTileSchedule, planSignals, validatePlan, type ChunkPlan } from "@ovl/chunk-plan";
import { measure, type Measurement, type MeasureOptions, type SuiteResult } from "../harness.js";

const WORLDS = [64, 256, 1024];
const SPLIT = 4;
const GPUS_PER_NODE = 8;
/** Rows per rank's shard: every chunk of a split-4 shard holds whole 2 KiB rows. */
const ROWS_PER_RANK = 16;
const COLS = 1024;
/** The GEMM the gathered tensor feeds (A = x is [M, K]); tiles as the GPU suites use. */
const GEMM_N = 1024;
const TILE = { BM: 128, BN: 128, BK: 64 } as const;

/** What the plan and validate cases call: the library, or another build of it (the before/after comparison of plan-scale-1024-2026-11-26 passes one). */
export interface PlanScaleLibrary {
  allGatherHierarchical: typeof allGatherHierarchical;
  validatePlan: typeof validatePlan;
}

/** The hierarchical AllGather of `world` ranks this suite measures, built by `lib`. */
export function hierarchicalPlan(world: number, lib: PlanScaleLibrary = { allGatherHierarchical, validatePlan }): ChunkPlan {
  return lib.allGatherHierarchical({
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

function validated(p: ChunkPlan, lib: PlanScaleLibrary = { allGatherHierarchical, validatePlan }): ChunkPlan {
  const result = lib.validatePlan(p);
  if (!result.ok) throw new Error(`plan ${p.name} is invalid: ${result.errors[0]?.message ?? "?"}`);
  return p;
}

/** The options of the plan and validate cases at `world` ranks (`ops`: the plan's op count). */
function caseOptions(world: number, ops: number): MeasureOptions {
  const extra = { ranks: world, mesh: `[${world / GPUS_PER_NODE}, ${GPUS_PER_NODE}]`, split: SPLIT, ops };
  // Medians of several runs after a warm-up; large worlds take a second or more per call.
  return {
    itemsPerIteration: ops,
    extra,
    warmup: world >= 1024 ? 2 : 3,
    maxIterations: world >= 1024 ? 7 : 20,
    budgetMs: 8000,
  };
}

/**
 * The suite's first three cases at `world` ranks with library `lib`: plan + validate in a
 * row, plan alone, validate alone (an already built plan). Returns them and the validated plan.
 */
export function planAndValidateCases(
  world: number,
  lib: PlanScaleLibrary = { allGatherHierarchical, validatePlan },
): {
  measurements: Measurement[];
  built: ChunkPlan;
  opts: MeasureOptions;
} {
  const ops = opCount(hierarchicalPlan(world, lib));
  const opts = caseOptions(world, ops);
  const measurements: Measurement[] = [];
  // Plan + validate first, while no other plan of this size is alive: each run's plan is
  // garbage by the next, as in a program that plans and validates once.
  measurements.push(
    measure(`plan + validate: hierarchical AllGather, ${world} ranks`, () => validated(hierarchicalPlan(world, lib), lib), opts),
  );
  measurements.push(measure(`plan: hierarchical AllGather, ${world} ranks`, () => hierarchicalPlan(world, lib), opts));
  const built = validated(hierarchicalPlan(world, lib), lib);
  measurements.push(measure(`validate: hierarchical AllGather, ${world} ranks`, () => validated(built, lib), opts));
  return { measurements, built, opts };
}

function lowered(p: ChunkPlan, world: number): number {
  const schedule = lowerToTileSchedule(
    p,
    { tensor: "x", problem: { M: world * ROWS_PER_RANK, N: GEMM_N, K: COLS }, tile: TILE, persistent: { numSms: 132 }, groupSizeM: 8 },
    { role: "consumer" },
  );
  return schedule.ranks.length;
}

export default function run(): SuiteResult {
  const measurements: Measurement[] = [];
  for (const world of WORLDS) {
    const { measurements: first, built, opts } = planAndValidateCases(world);
    measurements.push(...first);
    const ops = opts.itemsPerIteration ?? 0;
    // Signals and lowering are far slower at 1024 ranks (tens of seconds): one timed run there.
    const slow: MeasureOptions = world >= 1024 ? { ...opts, warmup: 0, minIterations: 1, maxIterations: 1 } : { ...opts, maxIterations: 5 };
    let signalled: ChunkPlan | undefined;
    measurements.push(measure(`planSignals: hierarchical AllGather, ${world} ranks`, () => (signalled = planSignals(built)), slow));
    const withSignals = signalled as ChunkPlan;
    measurements.push(
      measure(`lowerToTileSchedule (consumer): hierarchical AllGather, ${world} ranks`, () => lowered(withSignals, world), slow),
    );
    console.error(`plan-scale: ${world} ranks, ${ops} ops done`);
  }
  return {
    suite: "plan-scale",
    description:
      "Planning (allGatherHierarchical) and validating (validatePlan: structure, exactly-once writes, deadlock and race checks, symbolic execution against the AllGather claim) a hierarchical AllGather on mesh [world/8, 8] with split 4, each timed alone and both in a row (medians after a warm-up); then planSignals and lowerToTileSchedule (consumer, M = 16·world, N = K = 1024, 128×128×64 tiles, 132 SMs) on that plan. Items are the plan's ops, so items/s is ops handled per second.",
    measurements,
  };
}
