// The autotuner (AutoOverlap §5.2, "autotuning the knobs"): enumerate the search space,
// prune what does not fit memory or cannot be emitted, rank the rest by a cost model,
// optionally measure the best k and the non-overlapped baseline; cache by (operator, shape,
// world, device); and take the non-overlapped path when overlapping loses (decide.ts).
import { DEFAULT_TARGET } from "@ovl/primitives";
import type { ChunkPlan } from "@ovl/chunk-plan";
import { allReduceCandidates } from "./all-reduce.js";
import { candidateMemory, memoryMisfit, type MemoryLimits } from "./memory.js";
import { candidatePlan, candidateSchedule, chunkMisfit, type BuiltCandidate } from "./build.js";
import { lookupTune, tuneCacheKey, type TuneCache, type TuneCacheEntry } from "./cache.js";
import type { CostEstimate, CostFunction } from "./cost.js";
import { decidePath, type TuneFigure } from "./decide.js";
import { TuneError } from "./errors.js";
import {
  candidateKey,
  DEFAULT_TUNE_SPACE,
  enumerateCandidates,
  TuneProblem,
  type Candidate,
  type TunePlan,
  type TuneProblemInput,
  type TuneSpace,
} from "./space.js";

/** A candidate the model priced. */
export interface RankedCandidate {
  readonly candidate: Candidate;
  readonly key: string;
  readonly predictedMs: number;
  readonly detail?: Readonly<Record<string, number>>;
  /** Per-rank bytes of global memory. */
  readonly globalBytes: number;
}

/** A candidate left out, and why. */
export interface PrunedCandidate {
  readonly candidate: Candidate;
  readonly key: string;
  readonly reason: string;
}

/** A candidate sent to `measure`: its measured time, or why it could not be measured. */
export interface MeasuredCandidate extends RankedCandidate {
  readonly measuredMs?: number;
  readonly error?: string;
}

/** Progress of a search: pricing by the model, then measuring. */
export interface TuneProgress {
  readonly phase: "model" | "measure";
  readonly done: number;
  readonly total: number;
  readonly key: string;
}

/** Options of {@link rankCandidates}. */
export interface RankOptions {
  /** Prices a candidate (e.g. `simulatorCost("H200_SXM")`). */
  readonly cost: CostFunction;
  /** Memory of one GPU; candidates that exceed it are pruned. */
  readonly memory: MemoryLimits;
  /** The knobs' values (default {@link DEFAULT_TUNE_SPACE}). */
  readonly space?: TuneSpace;
  /** SMs of the GPU: programs of the persistent GEMM (minus communication SMs); default 132. */
  readonly numSms?: number;
  readonly onProgress?: (p: TuneProgress) => void;
}

/** Options of {@link tune}. */
export interface TuneOptions extends RankOptions {
  /** Device name of the cache key (the hardware model's or the GPU's). */
  readonly device: string;
  /** Measures a candidate on real hardware, in ms (`undefined`: cannot be measured). Without it, the model decides. */
  readonly measure?: (c: RankedCandidate) => Promise<number | undefined> | number | undefined;
  /** How many of the best-ranked candidates to measure (default 3). */
  readonly topK?: number;
  /** A cache to consult first; a hit is returned without searching. */
  readonly cache?: TuneCache;
}

/** The ranking of a space: priced candidates fastest first, and the pruned ones. */
export interface Ranking {
  readonly ranked: RankedCandidate[];
  readonly pruned: PrunedCandidate[];
}

/** What {@link tune} chose and why. */
export interface TuneResult {
  readonly problem: TuneProblem;
  readonly device: string;
  readonly cacheKey: string;
  readonly winner: Candidate;
  readonly winnerKey: string;
  readonly predictedMs: number;
  readonly measuredMs?: number;
  /** `sequential` when the chosen path does not overlap (the model or the measurement says overlapping loses). */
  readonly decision: "overlapped" | "sequential";
  /**
   * The figure each path competed with: its fastest measured candidate when the run measured
   * one (the non-overlapped baseline is always measured with the others), else its best
   * prediction. Empty for a cache hit.
   */
  readonly figures: { readonly overlapped?: TuneFigure; readonly sequential?: TuneFigure };
  /** One sentence for people: the choice and the numbers behind it, each marked measured or predicted. */
  readonly message: string;
  /** True when the result came from the cache (then `ranked`, `pruned` and `measured` are empty). */
  readonly fromCache: boolean;
  readonly ranked: RankedCandidate[];
  readonly pruned: PrunedCandidate[];
  readonly measured: MeasuredCandidate[];
  /** The cache entry of this result, for `storeTune`. */
  readonly entry: TuneCacheEntry;
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Price every candidate of the space that fits: pruned first by memory (global and shared),
 * then by chunk/tile alignment, then by plans or schedules the library refuses; the rest
 * ranked by `cost`, fastest first (ties keep the space's order, so the ranking is deterministic).
 */
export function rankCandidates(problemInput: TuneProblemInput, options: RankOptions): Ranking {
  const parsed = TuneProblem.safeParse(problemInput);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    throw new TuneError(
      "bad-problem",
      `problem.${i?.path.join(".") ?? ""}: ${i?.message ?? "invalid"} (operator ag-gemm, gemm-rs or gemm-ar, positive M N K, world ≥ 2)`,
    );
  }
  const problem = parsed.data;
  const space = options.space ?? DEFAULT_TUNE_SPACE;
  const candidates = problem.operator === "gemm-ar" ? allReduceCandidates(problem, space) : enumerateCandidates(space);
  const numSms = options.numSms ?? DEFAULT_TARGET.smCount;
  const plans = new Map<string, ChunkPlan | Error>();
  const planAt = (split: number, shape: TunePlan = "flat"): ChunkPlan => {
    const key = `${split}|${shape}`;
    let p = plans.get(key);
    if (p === undefined) {
      try {
        p = candidatePlan(problem, split, shape);
      } catch (e) {
        p = e instanceof Error ? e : new Error(String(e));
      }
      plans.set(key, p);
    }
    if (p instanceof Error) throw p;
    return p;
  };
  const ranked: RankedCandidate[] = [];
  const pruned: PrunedCandidate[] = [];
  candidates.forEach((candidate, i) => {
    const key = candidateKey(candidate);
    options.onProgress?.({ phase: "model", done: i + 1, total: candidates.length, key });
    const misfit =
      memoryMisfit(problem, candidate, options.memory) ?? (candidate.path === "overlapped" ? chunkMisfit(problem, candidate) : undefined);
    if (misfit !== undefined) {
      pruned.push({ candidate, key, reason: misfit });
      return;
    }
    try {
      let estimate: CostEstimate;
      if (candidate.path === "sequential") {
        estimate = options.cost({ problem, candidate });
      } else {
        const plan = planAt(candidate.split, candidate.plan);
        const built: BuiltCandidate = { plan, schedule: candidateSchedule(problem, plan, candidate, numSms - candidate.commSms) };
        estimate = options.cost({ problem, candidate, built });
      }
      if (!Number.isFinite(estimate.latencyMs) || estimate.latencyMs < 0)
        throw new Error(`the cost function returned ${estimate.latencyMs} ms`);
      const globalBytes = candidateMemory(problem, candidate).globalBytes;
      ranked.push({
        candidate,
        key,
        predictedMs: estimate.latencyMs,
        globalBytes,
        ...(estimate.detail ? { detail: estimate.detail } : {}),
      });
    } catch (e) {
      pruned.push({ candidate, key, reason: `cannot be built or priced: ${messageOf(e)}` });
    }
  });
  // Stable: equal predictions keep the space's order, which lists the measured-best defaults first.
  ranked.sort((a, b) => a.predictedMs - b.predictedMs);
  return { ranked, pruned };
}

/**
 * The candidates to measure: the best `k` of `ranked` that the model can tell apart. Two
 * candidates that differ only in the L2 grouping of the tile order (`groupSizeM`, which the
 * model does not price) and are predicted alike are one candidate to the model: measuring
 * both would spend a measurement on a choice the ranking did not make, so the better ranked
 * one stands for both.
 */
export function measurementSet(ranked: readonly RankedCandidate[], k: number): RankedCandidate[] {
  const out: RankedCandidate[] = [];
  const seen = new Set<string>();
  for (const r of ranked) {
    if (out.length >= Math.max(1, k)) break;
    const c = r.candidate;
    const key = c.path === "sequential" ? "sequential" : `${candidateKey({ ...c, groupSizeM: 0 })}|${r.predictedMs.toPrecision(9)}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(r);
  }
  return out;
}

/**
 * Tune a fused operator: a cache hit is returned as is; otherwise rank the space by the
 * model ({@link rankCandidates}) and, when `measure` is given, measure the best `topK`
 * overlapped candidates and the non-overlapped baseline in the same run. Each path then
 * competes with its fastest measured figure, or its best prediction where nothing of it was
 * measured (`decidePath`); `figures` and `message` say which is which. When the
 * non-overlapped path wins, `decision` is `sequential`. Store `result.entry` with `storeTune`.
 * @throws {TuneError} `nothing-fits` when every candidate is pruned (the reasons are in the message).
 */
export async function tune(problemInput: TuneProblemInput, options: TuneOptions): Promise<TuneResult> {
  const problem = TuneProblem.parse({ ...problemInput });
  const cacheKey = tuneCacheKey(problem, options.device);
  const hit = options.cache === undefined ? undefined : lookupTune(options.cache, cacheKey);
  if (hit !== undefined) {
    return {
      problem,
      device: options.device,
      cacheKey,
      winner: hit.winner,
      winnerKey: candidateKey(hit.winner),
      predictedMs: hit.predictedMs,
      ...(hit.measuredMs !== undefined ? { measuredMs: hit.measuredMs } : {}),
      decision: hit.decision,
      figures: {},
      message: `${hit.message} (cached ${hit.at})`,
      fromCache: true,
      ranked: [],
      pruned: [],
      measured: [],
      entry: hit,
    };
  }
  const { ranked, pruned } = rankCandidates(problem, options);
  const best = ranked[0];
  if (best === undefined) {
    const reasons = [...new Set(pruned.map((p) => p.reason))].slice(0, 3).join("; ");
    throw new TuneError("nothing-fits", `no candidate of the space fits ${cacheKey}: ${reasons}`);
  }
  const measured: MeasuredCandidate[] = [];
  if (options.measure !== undefined) {
    // The best k overlapped candidates the model tells apart, and always the non-overlapped
    // baseline they are compared with, in the same run.
    const baseline = ranked.find((r) => r.candidate.path === "sequential");
    const overlapped = ranked.filter((r) => r.candidate.path === "overlapped");
    const toMeasure = [...measurementSet(overlapped, options.topK ?? 3), ...(baseline === undefined ? [] : [baseline])];
    const k = toMeasure.length;
    for (let i = 0; i < k; i++) {
      const r = toMeasure[i]!;
      options.onProgress?.({ phase: "measure", done: i, total: k, key: r.key });
      try {
        const ms = await options.measure(r);
        measured.push(ms === undefined || !Number.isFinite(ms) ? { ...r, error: "not measurable here" } : { ...r, measuredMs: ms });
      } catch (e) {
        measured.push({ ...r, error: messageOf(e) });
      }
      options.onProgress?.({ phase: "measure", done: i + 1, total: k, key: r.key });
    }
  }
  const { decision, chosen, figures, message } = decidePath(ranked, measured);
  const measuredMs = measured.find((m) => m.key === chosen.key && m.measuredMs !== undefined)?.measuredMs;
  const entry: TuneCacheEntry = {
    operator: problem.operator,
    M: problem.M,
    N: problem.N,
    K: problem.K,
    world: problem.world,
    device: options.device,
    winner: chosen.candidate.path === "sequential" ? { path: "sequential" } : { ...chosen.candidate, tile: { ...chosen.candidate.tile } },
    predictedMs: chosen.predictedMs,
    ...(measuredMs !== undefined ? { measuredMs } : {}),
    decision,
    message,
    at: new Date().toISOString(),
  };
  return {
    problem,
    device: options.device,
    cacheKey,
    winner: chosen.candidate,
    winnerKey: chosen.key,
    predictedMs: chosen.predictedMs,
    ...(measuredMs !== undefined ? { measuredMs } : {}),
    decision,
    figures,
    message,
    fromCache: false,
    ranked,
    pruned,
    measured,
    entry,
  };
}
