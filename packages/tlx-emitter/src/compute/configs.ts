// Tuned compute configurations: per target, a table of the fastest measured body variant,
// tile, L2 grouping, stages and warps per (operator, M, N, K, dtype; ag-moe also its routing), which compile() reads
// when an operator names no tile. Shapes not in the table take the nearest entry.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { TARGETS, type TargetName } from "@ovl/primitives";
import { z } from "zod";
import { ELEMENT_BYTES } from "../core/device/index.js";
import { TLX_NOTIFIERS } from "../core/operator.js";
import { EmitError } from "../core/writer/index.js";
import { assetRoot } from "../core/assets.js";
import { BUILTIN_BODIES } from "../core/builtin.js";

/** Schema id of a configuration table. */
export const COMPUTE_CONFIGS_SCHEMA = "ovl.compute-configs/v1" as const;

const Dim = z.number().int().positive();

/** The fastest warp-specialised (TLX, sm_90a) GEMM measured at a shape, which the TLX backend takes. */
export const TlxConfigEntry = z.object({
  /** How the two consumer warp groups share tiles. */
  consumerSchedule: z.enum(["cooperative", "pingpong"]),
  BM: Dim,
  BN: Dim,
  BK: Dim,
  groupM: Dim,
  /** Ring depth. */
  stages: Dim,
  /** Column slices of the epilogue's TMA stores (4: cooperative only). */
  epilogueSplit: z.union([z.literal(1), z.literal(2), z.literal(4)]).optional(),
  /** GEMM+RS: the warp groups that issue the tile-done notifies (default `consumers`). */
  notifier: z.enum(TLX_NOTIFIERS).optional(),
  /** Cooperative only: CTAs per cluster along M sharing B blocks by TMA multicast (default 1). */
  clusterM: z.union([z.literal(1), z.literal(2)]).optional(),
  /** Measured median (ms), in the same run as the entry's own `ms` and `cublasMs`. */
  ms: z.number().positive().optional(),
});
export type TlxConfigEntry = z.infer<typeof TlxConfigEntry>;

/** The operators a table tunes. */
export const TUNED_OPERATORS = ["ag-gemm", "gemm-rs", "ag-moe"] as const;
export type TunedOperator = (typeof TUNED_OPERATORS)[number];

/** One measured shape and the configuration that won there. */
export const ComputeConfigEntry = z
  .object({
    /** The operator whose compute kernel this is: AG+GEMM's consumer, GEMM+RS's producer or ag-moe's gather + grouped GEMM. */
    op: z.enum(TUNED_OPERATORS),
    /**
     * The per-rank GEMM `C[M×N] = A[M×K]·B[K×N]` (M: all rows the kernel computes); for ag-moe
     * M is the tokens, N this rank's intermediate columns and K the hidden size.
     */
    M: Dim,
    N: Dim,
    K: Dim,
    /** ag-moe only (required there): the routing's experts and top-k. */
    experts: Dim.optional(),
    topk: Dim.optional(),
    dtype: z.enum(["bf16", "fp16", "fp32"]),
    /** Built-in body variant (`kernels/<body>.py`) of the operator's family. */
    body: z.enum(BUILTIN_BODIES),
    BM: Dim,
    BN: Dim,
    BK: Dim,
    groupM: Dim,
    numStages: Dim,
    numWarps: Dim,
    /** Measured median of the winner and of cuBLAS in the same run (ms), for people. */
    ms: z.number().positive().optional(),
    cublasMs: z.number().positive().optional(),
    /** The TLX backend's configuration at this shape (absent: not measured; the TLX backend then takes its defaults). */
    tlx: TlxConfigEntry.optional(),
    /** ag-moe: the measured median of the fastest vLLM-style fused-MoE kernel in the same run (ms), for people. */
    fusedMoeMs: z.number().positive().optional(),
  })
  .refine((e) => (e.op === "ag-moe") === (e.experts !== undefined && e.topk !== undefined), {
    message: "an ag-moe entry names its routing (experts, topk); other entries name none",
  });
export type ComputeConfigEntry = z.infer<typeof ComputeConfigEntry>;

/** A target's table. */
export const ComputeConfigTable = z.object({
  $schema: z.literal(COMPUTE_CONFIGS_SCHEMA),
  /** Target key (`h100`, …) the entries were measured on. */
  target: z.enum(Object.keys(TARGETS) as [TargetName, ...TargetName[]]),
  /** The GPU and software of the run, and where its results are. */
  device: z.string(),
  measured: z.string(),
  source: z.string(),
  entries: z.array(ComputeConfigEntry),
});
export type ComputeConfigTable = z.infer<typeof ComputeConfigTable>;

/** What a lookup asks for. */
export interface ComputeQuery {
  readonly op: TunedOperator;
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly dtype: "bf16" | "fp16" | "fp32" | "fp8e4m3";
  /** ag-moe: the routing (the distance counts its experts and top-k as it counts M, N and K). */
  readonly experts?: number;
  readonly topk?: number;
}

/** A lookup's answer: the entry, and whether it is the query's own shape or the nearest one. */
export interface ComputeMatch {
  readonly entry: ComputeConfigEntry;
  readonly match: "exact" | "nearest";
  /** `|log2 M/M'| + |log2 N/N'| + |log2 K/K'|` (ag-moe: plus the routing's terms; 0 for an exact match). */
  readonly distance: number;
}

/**
 * The entry of `table` for `q`. Only entries of the same operator and element size qualify
 * (bf16 entries serve fp16: the same shared memory and tensor-core rate; none serve fp32 or
 * fp8e4m3, whose operands are 4 and 1 bytes: they take their operator's default tile).
 * The entry of `q`'s own shape wins (its own dtype first); otherwise the nearest shape by
 * `|log2 M/M'| + |log2 N/N'| + |log2 K/K'|` (ag-moe: plus `|log2 E/E'| + |log2 k/k'|` of the
 * routing), ties to the earlier entry. Undefined when no entry qualifies.
 */
export function lookupComputeConfig(table: ComputeConfigTable, q: ComputeQuery): ComputeMatch | undefined {
  let best: (ComputeMatch & { readonly key: readonly number[] }) | undefined;
  for (const entry of table.entries) {
    if (entry.op !== q.op || ELEMENT_BYTES[entry.dtype] !== ELEMENT_BYTES[q.dtype]) continue;
    const routing =
      entry.experts === undefined || entry.topk === undefined
        ? 0
        : Math.abs(Math.log2((q.experts ?? entry.experts) / entry.experts)) + Math.abs(Math.log2((q.topk ?? entry.topk) / entry.topk));
    const distance = Math.abs(Math.log2(q.M / entry.M)) + Math.abs(Math.log2(q.N / entry.N)) + Math.abs(Math.log2(q.K / entry.K)) + routing;
    // Lexicographic: distance, then the query's own dtype; equal keys keep the earlier entry.
    const key = [distance, entry.dtype === q.dtype ? 0 : 1];
    if (best === undefined || key[0]! < best.key[0]! - 1e-12 || (Math.abs(key[0]! - best.key[0]!) <= 1e-12 && key[1]! < best.key[1]!))
      best = { entry, match: distance === 0 ? "exact" : "nearest", distance, key };
  }
  if (best === undefined) return undefined;
  const { key: _key, ...match } = best;
  return match;
}

/** Checks a parsed table. @throws {EmitError} `bad-param` naming the first problem. */
export function parseComputeConfigs(json: unknown, where = "compute configuration table"): ComputeConfigTable {
  const r = ComputeConfigTable.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new EmitError("bad-param", `${where}: ${i?.path.join(".") ?? ""}: ${i?.message ?? "invalid"}`);
  }
  return r.data;
}

const cache = new Map<string, ComputeConfigTable | null>();

/** Path of a target's table in the package (`configs/<target>.json`), or in `dir` when given. */
export function computeConfigPath(target: TargetName, dir?: string): string {
  return join(dir ?? join(assetRoot(), "configs"), `${target}.json`);
}

/**
 * The targets whose tables `target` may use, its own first: then those of the same
 * architecture, SM count and shared memory per block (the H200 and the H100: one GH100 die).
 */
export function computeConfigTargets(target: TargetName): TargetName[] {
  const t = TARGETS[target];
  const same = (Object.keys(TARGETS) as TargetName[]).filter(
    (n) =>
      n !== target &&
      TARGETS[n].arch === t.arch &&
      TARGETS[n].smCount === t.smCount &&
      TARGETS[n].sharedBytesPerBlock === t.sharedBytesPerBlock,
  );
  return [target, ...same];
}

/**
 * The table compile() uses for `target`: its own (`configs/<target>.json`) or, when it has
 * none, that of a target with the same architecture, SM count and shared memory (the H200
 * borrows the H100's: the same GH100 die); `null` when neither exists. The table's own
 * `target` field says which one it is. `dir`: read the tables from there instead of the
 * package's `configs/`.
 */
export function computeConfigs(target: TargetName, dir?: string): ComputeConfigTable | null {
  const key = `${dir ?? ""}\0${target}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  let table: ComputeConfigTable | null = null;
  for (const name of computeConfigTargets(target)) {
    const path = computeConfigPath(name, dir);
    if (existsSync(path)) {
      table = parseComputeConfigs(JSON.parse(readFileSync(path, "utf8")), path);
      if (table.target !== name) throw new EmitError("bad-param", `${path}: holds the ${table.target} table, not ${name}'s`);
      break;
    }
  }
  cache.set(key, table);
  return table;
}

/**
 * The tables a lookup for `target` reads, in order: `given` alone when the caller names one
 * (`null`: none); else the target's own (or borrowed, see `computeConfigs`) and then those of
 * the targets on the same die, so an operator the own table has no entries of takes the
 * same-die target's measured ones.
 */
export function candidateTables(target: TargetName, given?: ComputeConfigTable | null): ComputeConfigTable[] {
  if (given !== undefined) return given === null ? [] : [given];
  const out: ComputeConfigTable[] = [];
  for (const name of computeConfigTargets(target)) {
    const t = computeConfigs(name);
    if (t !== null && !out.some((o) => o.target === t.target)) out.push(t);
  }
  return out;
}

/** The first of `tables` with an entry for `q` (`lookupComputeConfig`), and that entry; undefined when none has. */
export function lookupFirst(
  tables: readonly ComputeConfigTable[],
  q: ComputeQuery,
): { readonly table: ComputeConfigTable; readonly match: ComputeMatch } | undefined {
  for (const table of tables) {
    const match = lookupComputeConfig(table, q);
    if (match !== undefined) return { table, match };
  }
  return undefined;
}
