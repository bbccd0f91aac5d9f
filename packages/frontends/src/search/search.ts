// Mercury's auto-tuner (§6) over CommIR: enumerate mesh factorisations, axis-to-level
// assignments and shifts (each shift bundled with the shard of the buffers it passes),
// prune by per-rank memory, rank by a cost model (analytic by default, pluggable).
import { FrontendError } from "../errors.js";
import { analyzeProgram } from "../commir/analyze.js";
import type { Program } from "../commir/ir.js";
import { parallelize, shift, tile } from "../commir/transforms.js";
import { analyticCost, type CostModel, type Hardware, type ScheduleSummary, summarize } from "./cost.js";
import { signature, type ScheduleSignature } from "./schedules.js";

/** Options of {@link searchSchedules}. */
export interface SearchOptions {
  /** Number of GPUs. */
  readonly world: number;
  readonly hardware: Hardware;
  /** Most mesh levels to factor the world into (default 2). */
  readonly maxLevels?: number;
  /** Per-rank memory budget in bytes (default `hardware.memoryBytes`). */
  readonly capacityBytes?: number;
  /** Ranks candidates (default {@link analyticCost}). */
  readonly costModel?: CostModel;
  /** FLOPs per loop point of the grid (default 2: a multiply-add). */
  readonly flopsPerPoint?: number;
  /** Refuse spaces larger than this (default 20000 candidates). */
  readonly maxCandidates?: number;
}

/** One scheduled candidate. */
export interface Candidate {
  readonly program: Program;
  readonly mesh: readonly number[];
  readonly signature: ScheduleSignature;
  readonly summary: ScheduleSummary;
  readonly memoryBytes: number;
  /** The cost model's estimate (seconds for the analytic model). */
  readonly cost: number;
}

/** The search's outcome. */
export interface SearchResult {
  /** Candidates within capacity, cheapest first. */
  readonly ranked: readonly Candidate[];
  /** Candidates over capacity (Mercury: "pruned early"), with their footprint. */
  readonly pruned: readonly Candidate[];
  /** Combinations the primitives or lowering refuse (indivisible tiles, strided reads, ...). */
  readonly rejected: number;
}

/** Ordered factorisations of `world` into at most `maxLevels` factors, each >= 2 (`[1]` for one GPU). */
export function meshFactorisations(world: number, maxLevels = 2): number[][] {
  if (!Number.isSafeInteger(world) || world < 1)
    throw new FrontendError("invalid-spec", `world size must be a positive integer, got ${world}`);
  if (world === 1) return [[1]];
  const out: number[][] = [];
  const go = (left: number, acc: number[]): void => {
    if (left === 1) {
      out.push(acc);
      return;
    }
    if (acc.length === maxLevels) return;
    for (let f = 2; f <= left; f++) if (left % f === 0) go(left / f, [...acc, f]);
  };
  go(world, []);
  return out;
}

/** A schedule choice: the logical axis parallelized at each level, and the axis shifted by it (or none). */
interface Choice {
  readonly parallel: readonly string[];
  readonly shifts: readonly (string | undefined)[];
}

function product<T>(lists: readonly (readonly T[])[]): T[][] {
  return lists.reduce<T[][]>((acc, xs) => acc.flatMap((a) => xs.map((x) => [...a, x])), [[]]);
}

/** Applies a choice: per level, tile the axis's remaining loop to the level's size and parallelize (or shift) the outer part. */
function build(base: Program, mesh: readonly number[], c: Choice): Program {
  let p = base;
  const rest: Record<string, string> = Object.fromEntries(base.axes.map((a) => [a.name, a.name]));
  const take = (axisName: string, n: number, tag: string): string => {
    const cur = rest[axisName]!;
    const ext = p.loops.find((l) => l.name === cur)!.extent;
    if (ext % n !== 0) throw new FrontendError("invalid-transform", `${axisName} does not divide by ${n}`);
    const outer = `${axisName}_${tag}`;
    p = tile(p, cur, ext / n, [outer, `${axisName}_r${tag}`]);
    rest[axisName] = `${axisName}_r${tag}`;
    return outer;
  };
  const parallelLoops = mesh.map((n, level) => {
    const outer = take(c.parallel[level]!, n, `p${level}`);
    p = parallelize(p, outer, level);
    return outer;
  });
  mesh.forEach((n, level) => {
    const s = c.shifts[level];
    if (s === undefined) return;
    const outer = take(s, n, `s${level}`);
    p = shift(p, outer, parallelLoops[level]!);
  });
  return p;
}

/**
 * Searches the schedules of `base` on `o.world` GPUs: every mesh factorisation, every
 * assignment of a logical axis to each level, and per level optionally a shift of another
 * axis by that level's parallel loop. A shift that passes no buffer is dropped (Mercury
 * bundles shift with shard: "shifting without sharding produces no semantic change").
 */
export function searchSchedules(base: Program, o: SearchOptions): SearchResult {
  const cost = o.costModel ?? analyticCost;
  const capacity = o.capacityBytes ?? o.hardware.memoryBytes;
  const axes = base.axes.map((a) => a.name);
  const seen = new Set<string>();
  const ranked: Candidate[] = [];
  const pruned: Candidate[] = [];
  let rejected = 0;
  let count = 0;
  for (const mesh of meshFactorisations(o.world, o.maxLevels ?? 2)) {
    for (const parallel of product(mesh.map(() => axes))) {
      for (const shifts of product(mesh.map(() => [undefined, ...axes]))) {
        if (++count > (o.maxCandidates ?? 20000)) {
          throw new FrontendError(
            "search-too-large",
            `more than ${o.maxCandidates ?? 20000} candidates; lower maxLevels or raise maxCandidates`,
          );
        }
        try {
          const program = build(base, mesh, { parallel, shifts });
          const facts = analyzeProgram(program, mesh);
          const passes = facts.buffers.filter((f) => f.comm === "ring").flatMap((f) => f.ring!.map((r) => r.level));
          if (shifts.some((s, level) => s !== undefined && !passes.includes(level))) continue;
          const sig = signature(program);
          const key = JSON.stringify([mesh, sig]);
          if (seen.has(key)) continue;
          seen.add(key);
          const summary = summarize(facts, o.flopsPerPoint);
          const cand: Candidate = {
            program,
            mesh,
            signature: sig,
            summary,
            memoryBytes: summary.memoryBytes,
            cost: cost(summary, o.hardware),
          };
          (cand.memoryBytes > capacity ? pruned : ranked).push(cand);
        } catch (e) {
          if (!(e instanceof FrontendError)) throw e;
          rejected++;
        }
      }
    }
  }
  ranked.sort((a, b) => a.cost - b.cost);
  return { ranked, pruned, rejected };
}

/** Whether `result` holds a candidate on `mesh` with signature `sig` (within capacity or pruned). */
export function containsSchedule(result: SearchResult, mesh: readonly number[], sig: ScheduleSignature): boolean {
  const key = JSON.stringify([mesh, sig]);
  return [...result.ranked, ...result.pruned].some((c) => JSON.stringify([c.mesh, c.signature]) === key);
}
