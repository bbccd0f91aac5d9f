// The `ovl.report/v1` document the Python runner writes, as a zod schema: what ran (manifest,
// device, world, shapes, backends), whether it was right (relative error of every checked
// launch), how fast (median/p10/p90 per rank, max over ranks), baselines and failures.
import { z } from "zod";

/** Version tag of the report format. */
export const REPORT_SCHEMA = "ovl.report/v1" as const;

/** One checked launch: relative Frobenius error per rank (`null`: the output held NaN/inf). */
export const ReportCheck = z.object({
  run: z.number().int().nonnegative(),
  epoch: z.number().int().positive(),
  relErrors: z.array(z.number().nullable()),
  maxRelError: z.number().nullable(),
  tolerance: z.number().positive(),
  ok: z.boolean(),
});
export type ReportCheck = z.infer<typeof ReportCheck>;

/** Times of one rank's launches, in ms. */
export const RankTimes = z.object({
  rank: z.number().int().nonnegative(),
  median: z.number(),
  p10: z.number(),
  p90: z.number(),
  samples: z.number().int().positive(),
});
export type RankTimes = z.infer<typeof RankTimes>;

/** A failure: `code` (`wait-timeout`, `check-failed`, `bad-manifest`, `kernel-fault`...) and what to fix. */
export const ReportFailure = z
  .object({
    code: z.string(),
    message: z.string(),
    rank: z.number().int().optional(),
    slot: z.number().int().optional(),
    seen: z.number().int().optional(),
    expected: z.number().int().optional(),
    run: z.number().int().optional(),
    path: z.string().optional(),
  })
  .loose();
export type ReportFailure = z.infer<typeof ReportFailure>;

/** A report: the result of one `python -m ovl_runtime run`. */
export const Report = z.object({
  $schema: z.literal(REPORT_SCHEMA),
  manifest: z.string(),
  /**
   * `gpu` (under torchrun, CUDA events), `one-gpu` (every rank in one process on one GPU:
   * correctness only, its times are not performance figures) or `emulate` (CPU threads,
   * wall-clock times).
   */
  mode: z.enum(["gpu", "one-gpu", "emulate"]),
  device: z.string(),
  world: z.number().int().positive(),
  dtype: z.string(),
  shapes: z.object({
    operator: z.string(),
    M: z.number().int().positive(),
    N: z.number().int().positive(),
    K: z.number().int().positive(),
    rowsPerRank: z.number().int().positive().nullable(),
    buffers: z.record(z.string(), z.array(z.number().int().positive())),
  }),
  backends: z.object({
    symmetricMemory: z.string(),
    hostOps: z.enum(["copy-engine", "none"]),
    kernels: z.array(z.object({ name: z.string(), template: z.string(), stream: z.enum(["compute", "comm"]) })),
  }),
  epochs: z.number().int().nonnegative(),
  checks: z.array(ReportCheck),
  times: z
    .object({
      unit: z.literal("ms"),
      clock: z.enum(["cuda-events", "wall"]),
      perRank: z.array(RankTimes),
      /** The operator's time: the slowest rank's median. */
      maxMedian: z.number(),
    })
    .nullable(),
  baselines: z.array(z.object({ name: z.string(), ms: z.number().nullable(), error: z.string().optional() })),
  failures: z.array(ReportFailure),
  ok: z.boolean(),
  extra: z.record(z.string(), z.unknown()).optional(),
});
export type Report = z.infer<typeof Report>;
