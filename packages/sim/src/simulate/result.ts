// The simulator's output format `ovl.sim-result/v1`: per-rank predictions and timeline
// events, plain JSON so a CLI, an autotuner or a chart can read them.
import { z } from "zod";

/** Version tag of the simulation result format. */
export const SIM_RESULT_SCHEMA = "ovl.sim-result/v1" as const;

const Ms = z.number().nonnegative();

/**
 * One interval on a rank's timeline. Lanes: `compute` (waves or tiles, the reduction
 * pass), `waits` (per wave: from when a program was free for one of its tiles until its
 * last chunk arrived) and `stream <s>` (per communication stream: launch, transfer or
 * collective, signal write).
 */
export const TimelineEvent = z.object({
  lane: z.string(),
  kind: z.enum(["wave", "tile", "wait", "reduce", "launch", "transfer", "collective", "signal"]),
  startMs: Ms,
  endMs: Ms,
  label: z.string(),
});
export type TimelineEvent = z.infer<typeof TimelineEvent>;

/** One rank's prediction. */
export const RankSimulation = z.object({
  rank: z.number().int().nonnegative(),
  /** Predicted latency of the overlapped operator on this rank. */
  latencyMs: Ms,
  /** The compute kernel alone on all SMs, no waits. */
  computeAloneMs: Ms,
  /** The plan's communication alone (compute dependencies met at 0), with any reduction pass. */
  commAloneMs: Ms,
  /** `computeAloneMs + commAloneMs`: running them one after the other. */
  nonOverlappedMs: Ms,
  /** `max(computeAloneMs, commAloneMs)`: perfect overlap. */
  boundMs: Ms,
  /** TileLink's overlap ratio: the fraction of communication time hidden (may be < 0 when overlap loses). */
  overlapRatio: z.number(),
  /** SM-time the compute kernel spent waiting on chunks, per lane. */
  stallMs: Ms,
  events: z.array(TimelineEvent),
});
export type RankSimulation = z.infer<typeof RankSimulation>;

/** A simulation: the operator's figures are the maxima over ranks (the slowest rank finishes it). */
export const SimulationResult = z.object({
  $schema: z.literal(SIM_RESULT_SCHEMA),
  plan: z.string(),
  role: z.enum(["consumer", "producer"]),
  hardware: z.string(),
  backend: z.enum(["copy-engine", "sm"]),
  commSms: z.number().int().nonnegative(),
  world: z.number().int().positive(),
  latencyMs: Ms,
  computeAloneMs: Ms,
  commAloneMs: Ms,
  nonOverlappedMs: Ms,
  boundMs: Ms,
  overlapRatio: z.number(),
  /** `nonOverlappedMs / latencyMs`: above 1 when overlapping wins. */
  speedup: z.number().positive(),
  ranks: z.array(RankSimulation),
});
export type SimulationResult = z.infer<typeof SimulationResult>;
