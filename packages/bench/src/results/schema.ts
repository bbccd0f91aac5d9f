// The metadata of one run of the evidence tree (results/runs/<run>/run.json, `ovl.run/v1`):
// what ran where, its headline figure and what it decided, so the results index and the
// performance page are generated from data, not retyped. Also reads every run of the tree.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";

/** Version tag of run.json. */
export const RUN_SCHEMA = "ovl.run/v1" as const;

/** The repository root, and its evidence tree: one folder per run. */
export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../../..");
export const RUNS_DIR = join(REPO_ROOT, "results/runs");

/** ovl's operators as runs name them (the MLP layer's training step, `mlp-train`, among them). */
export const OPERATORS = [
  "ag-gemm",
  "gemm-rs",
  "gemm-ar",
  "a2a-gemm",
  "ag-moe",
  "moe-rs",
  "ag-attention",
  "ag-gemm-silu",
  "mlp",
  "mlp-train",
] as const;
/** What a run measured: an operator of ovl, a part of one, or a CPU-side package. */
export const Operator = z.enum([...OPERATORS, ...(["compute", "comm", "rs-reduce", "compile", "mapping", "chunk-plan"] as const)]);
export type Operator = z.infer<typeof Operator>;

/**
 * How it ran: `eager` / `graph` end to end on several GPUs (launched eagerly, or replayed from a CUDA
 * graph); `one-gpu` every rank on one GPU (correctness, not speed); `kernel-alone` a compute or
 * communication kernel by itself; `simulated` the simulator; `cpu` a CPU benchmark.
 */
export const Mode = z.enum(["eager", "graph", "one-gpu", "kernel-alone", "simulated", "cpu"]);
export type Mode = z.infer<typeof Mode>;

/**
 * One figure of a run, structured for the generated tables: a value (a geometric mean, say), the
 * range over the shapes, or both. Every number must appear in the run's own files.
 */
export const Figure = z
  .strictObject({
    operator: Operator,
    /** What the value is, e.g. "speed ÷ NCCL then cuBLAS, geometric mean over MLP-1…6". */
    metric: z.string().min(3),
    value: z.number().positive().optional(),
    min: z.number().positive().optional(),
    max: z.number().positive().optional(),
    unit: z.enum(["×", "ms", "µs", "%", "TFLOP/s", "GB/s"]),
    /** What a ratio (unit ×) is taken against, in the same run. */
    baseline: z.string().optional(),
    world: z.number().int().positive().optional(),
    mode: Mode,
  })
  .refine((f) => f.value !== undefined || (f.min !== undefined && f.max !== undefined), "a figure needs a value or a range");
export type Figure = z.infer<typeof Figure>;

/** run.json: `ovl.run/v1`. */
export const RunMeta = z.strictObject({
  $schema: z.literal(RUN_SCHEMA),
  date: z.iso.date(),
  /** GPUs as `<count>×<model>`, several machines comma-separated, or `CPU`. */
  device: z.string().regex(/^(CPU|\d+×H(100|200)(, \d+×H(100|200))*)$/),
  operators: z.array(Operator).nonempty(),
  /** World sizes (ranks) of the operators run; 1 for a kernel alone. */
  worlds: z.array(z.number().int().positive()).nonempty(),
  mode: z.array(Mode).nonempty(),
  /** One sentence with the run's measured figure, from its README. */
  headline: z.string().regex(/\d/, "the headline carries a measured figure").max(400),
  /** One sentence: what the run decided, or what the diagnostic found. */
  decided: z.string().min(20).max(600),
  figures: z.array(Figure).optional(),
  /** The scripts and commands that produced it (provenance/ files by their path). */
  provenance: z.array(z.string().min(3)).nonempty(),
});
export type RunMeta = z.infer<typeof RunMeta>;

/** A run of the tree: its folder name, its folder and its parsed run.json. */
export interface Run {
  readonly name: string;
  readonly dir: string;
  readonly meta: RunMeta;
}

/**
 * Every run under `root`, sorted by date then name.
 * @throws {Error} naming the folder when a run has no run.json or one that does not parse.
 */
export function loadRuns(root: string = RUNS_DIR): Run[] {
  const runs = readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => {
      const file = join(root, e.name, "run.json");
      if (!existsSync(file)) throw new Error(`results/runs/${e.name} has no run.json`);
      const parsed = RunMeta.safeParse(JSON.parse(readFileSync(file, "utf8")));
      if (!parsed.success) throw new Error(`results/runs/${e.name}/run.json: ${z.prettifyError(parsed.error)}`);
      return { name: e.name, dir: join(root, e.name), meta: parsed.data };
    });
  return runs.sort((a, b) => a.meta.date.localeCompare(b.meta.date) || a.name.localeCompare(b.name));
}
