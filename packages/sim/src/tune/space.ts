// The autotuner's search space (AutoOverlap §5.2: chunk size, backend, communication SMs;
// TileLink: tile shape and tile order): the knobs, their defaults, and the candidates
// they span — every overlapped combination plus the non-overlapped path.
import { z } from "zod";
import { COMM_SMS_CANDIDATES } from "./comm-sms.js";
import { TuneError } from "./errors.js";

/** The fused operator being tuned and its per-rank GEMM `A[M×K]·B[K×N]`. */
export const TuneProblem = z.object({
  /** `ag-gemm` (AllGather of A's rows, then GEMM), `gemm-rs` (GEMM, then ReduceScatter of C's rows) or `gemm-ar` (GEMM, then AllReduce of C). */
  operator: z.enum(["ag-gemm", "gemm-rs", "gemm-ar"]),
  M: z.number().int().positive(),
  N: z.number().int().positive(),
  K: z.number().int().positive(),
  world: z.number().int().min(2),
  dtype: z.enum(["bf16", "fp16", "fp32"]).default("bf16"),
  /**
   * GPUs per node when the ranks span nodes: the hierarchical plans (`TunePlan`) run on mesh
   * `[world / gpusPerNode, gpusPerNode]` (absent: one node; only the flat plan applies).
   */
  gpusPerNode: z.number().int().positive().optional(),
});
export type TuneProblem = z.infer<typeof TuneProblem>;
/** A problem as callers write it (`dtype` may be left out). */
export type TuneProblemInput = z.input<typeof TuneProblem>;

/** A GEMM tile: output `BM × BN`, K step `BK`. */
export interface TuneTile {
  readonly BM: number;
  readonly BN: number;
  readonly BK: number;
}

/** How transfers are realised: host-launched copy engine, or load/store on dedicated SMs. */
export type TuneBackend = "copy-engine" | "sm";

/**
 * The chunk plan's shape across nodes: `flat` (the one-level template over all ranks, as on one
 * node) or a two-level plan on mesh `[world / gpusPerNode, gpusPerNode]`, its stage order and its
 * schedule (`staged`: one stream; `pipelined`: a stream per stage). AllGather+GEMM takes every
 * order (`allGatherHierarchical`); GEMM+ReduceScatter only `intra-node-first`
 * (`reduceScatterHierarchical`: reduce in the node, then across).
 */
export const TUNE_PLANS = [
  "flat",
  "intra-node-first/staged",
  "intra-node-first/pipelined",
  "inter-node-first/staged",
  "inter-node-first/pipelined",
] as const;
/** A plan shape of the search space. */
export type TunePlan = (typeof TUNE_PLANS)[number];

/** One point of the overlapped space. */
export interface OverlappedCandidate {
  readonly path: "overlapped";
  /** Chunks per shard transfer: the chunk-size knob (`split(n)`). */
  readonly split: number;
  readonly backend: TuneBackend;
  /** SMs taken from compute to drive copies (0 with the copy engine). */
  readonly commSms: number;
  readonly tile: TuneTile;
  /** L2 grouping of the intra-chunk tile order (the swizzle; 1 = row-major). */
  readonly groupSizeM: number;
  /** `gemm-ar` only: the AllReduce's realisation (`./all-reduce.ts`). */
  readonly allReduce?: "partitioned" | "tilewise";
  /** The plan's shape across nodes (absent: `flat`). */
  readonly plan?: TunePlan;
}

/** The non-overlapped path: the collective on its own (NCCL), then the GEMM (or the reverse). */
export interface SequentialCandidate {
  readonly path: "sequential";
}

/** A point of the search space. */
export type Candidate = OverlappedCandidate | SequentialCandidate;

/** The values each knob takes. */
export interface TuneSpace {
  readonly splits: readonly number[];
  readonly backends: readonly TuneBackend[];
  /** SM counts tried with the `sm` backend. */
  readonly commSms: readonly number[];
  readonly tiles: readonly TuneTile[];
  readonly groupSizesM: readonly number[];
  /** Whether the non-overlapped path competes (default true). */
  readonly sequential?: boolean;
  /** Plan shapes tried (default: the flat plan only, as on one node). */
  readonly plans?: readonly TunePlan[];
}

/**
 * The default space: 4 splits × (copy engine + SM at 4/8/16 SMs, `COMM_SMS_CANDIDATES`: 32 lost to 16
 * on four H100s) × 3 tiles × 4 swizzles, and the non-overlapped path.
 */
export const DEFAULT_TUNE_SPACE: TuneSpace = {
  splits: [1, 2, 4, 8],
  backends: ["copy-engine", "sm"],
  commSms: COMM_SMS_CANDIDATES,
  tiles: [
    { BM: 128, BN: 256, BK: 64 },
    { BM: 128, BN: 128, BK: 64 },
    { BM: 256, BN: 128, BK: 64 },
  ],
  // Listed best-measured first (GROUP_M 8 on H200): ties in the ranking keep this order.
  groupSizesM: [8, 16, 4, 1],
  sequential: true,
};

/** A stable, readable key of a candidate, e.g. `overlapped split=2 copy-engine sms=0 tile=128x256x64 group=8`. */
export function candidateKey(c: Candidate): string {
  if (c.path === "sequential") return "sequential";
  const ar = c.allReduce === undefined ? "" : ` ${c.allReduce}`;
  const plan = c.plan === undefined || c.plan === "flat" ? "" : ` plan=${c.plan}`;
  return `overlapped${ar} split=${c.split} ${c.backend} sms=${c.commSms} tile=${c.tile.BM}x${c.tile.BN}x${c.tile.BK} group=${c.groupSizeM}${plan}`;
}

function positiveInts(name: string, values: readonly number[]): void {
  if (values.length === 0 || values.some((v) => !Number.isSafeInteger(v) || v < 1)) {
    throw new TuneError("bad-space", `space.${name} must list positive integers, got [${values.join(", ")}]`);
  }
}

/** Every candidate of `space`, overlapped ones first in knob order, then the non-overlapped path. */
export function enumerateCandidates(space: TuneSpace): Candidate[] {
  positiveInts("splits", space.splits);
  positiveInts("groupSizesM", space.groupSizesM);
  if (space.backends.includes("sm")) positiveInts("commSms", space.commSms);
  if (space.tiles.length === 0)
    throw new TuneError("bad-space", "space.tiles is empty: give at least one tile, e.g. { BM: 128, BN: 256, BK: 64 }");
  for (const t of space.tiles) positiveInts("tiles", [t.BM, t.BN, t.BK]);
  for (const p of space.plans ?? []) {
    if (!TUNE_PLANS.includes(p)) throw new TuneError("bad-space", `space.plans lists "${String(p)}": use ${TUNE_PLANS.join(", ")}`);
  }
  const out: Candidate[] = [];
  // Without `plans` a candidate names no plan (the flat one), so its key is what it always was.
  const plans: readonly (TunePlan | undefined)[] = space.plans ?? [undefined];
  for (const plan of plans) {
    for (const split of space.splits) {
      for (const backend of space.backends) {
        const sms = backend === "sm" ? space.commSms : [0];
        for (const commSms of sms) {
          for (const tile of space.tiles) {
            for (const groupSizeM of space.groupSizesM) {
              out.push({ path: "overlapped", split, backend, commSms, tile, groupSizeM, ...(plan === undefined ? {} : { plan }) });
            }
          }
        }
      }
    }
  }
  if (space.sequential !== false) out.push({ path: "sequential" });
  if (out.length === 0)
    throw new TuneError("bad-space", "the space has no candidate: list at least one backend, or allow the sequential path");
  return out;
}
