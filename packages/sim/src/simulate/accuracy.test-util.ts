// Compares the model with the GPU measurements of the repository's evidence tree (results/runs)
// (H200, 2026-11-22): baselines (cuBLAS GEMM, NCCL collective), the reduction kernel alone,
// and ovl's emitted kernels in three runs. Used by accuracy.test.ts;
// `npx tsx src/simulate/accuracy.test-util.ts` prints the tables of docs/simulate.md and
// results/accuracy-2026-11-22.md; with `--w8`, the world-8 predictions.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  allGatherSwizzle,
  applyTileArrivals,
  type ChunkPlan,
  lowerToTileSchedule,
  type Op,
  planSignals,
  push,
  reduceScatterDirect,
} from "@ovl/chunk-plan";
import { MLP_SHAPES as SUITE_SHAPES } from "../shapes.js";
import { predictBaselines } from "./baselines.js";
import { gemmMs, reducePassMs } from "./cost.js";
import { H100_SXM, H200_SXM, TRITON_GEMM_2026_11_22, type HardwareModel } from "./hardware.js";

/** H200_SXM with the Triton GEMM as the 2026-11-22 suites ran it (their kernels, not today's tuned ones). */
export const H200_AS_OF_2026_11_22: HardwareModel = {
  ...H200_SXM,
  tritonGemm: TRITON_GEMM_2026_11_22,
  // The SM push kernel of then (4 warps, 2048 elements a step): fitted on x2's SM rows.
  smCopy: { bandwidthPerSmGBps: 7.35, launchUs: 5 },
};
import type { SimulationResult } from "./result.js";
import { simulate } from "./simulate.js";
import type { CommBackend } from "./comm.js";

const GPU = join(dirname(fileURLToPath(import.meta.url)), "../../../../results/runs");
const TILE = { BM: 128, BN: 256, BK: 64 } as const;
const NUM_SMS = 132;

/** One prediction against one measurement (ms). */
export interface Comparison {
  readonly file: string;
  readonly name: string;
  readonly measuredMs: number;
  readonly predictedMs: number;
  /** `(predicted - measured) / measured`. */
  readonly error: number;
}

/** A comparison of one of ovl's emitted kernels. */
export interface KernelComparison extends Comparison {
  readonly operator: Operator;
  readonly world: number;
  /** 1..6: MLP-k (TileLink Table 4). */
  readonly mlp: number;
  /** The cuBLAS GEMM of the same problem timed by the same run (the machine's state), when the report has it. */
  readonly runGemmMs?: number;
  /** The model's cuBLAS GEMM of that problem. */
  readonly modelGemmMs: number;
}

/** The overlapped operators compared: AG+GEMM, and GEMM+RS by its delivery backend. */
export type Operator = "AG+GEMM" | "GEMM+RS ce" | "GEMM+RS sm";

const row = (file: string, name: string, measuredMs: number, predictedMs: number): Comparison => ({
  file,
  name,
  measuredMs,
  predictedMs,
  error: (predictedMs - measuredMs) / measuredMs,
});

/** The MLP shapes of the suites (TileLink Table 4), in order MLP-1…6: S tokens, H hidden, I intermediate. */
export const MLP_SHAPES: readonly { readonly S: number; readonly H: number; readonly I: number }[] = Object.values(SUITE_SHAPES).map(
  ({ S, H, I }) => ({ S, H, I }),
);

interface BaselineRow {
  shape: string;
  op: string;
  S: number;
  H: number;
  I: number;
  gemm_ms: number;
  collective_ms: number;
}

/** cuBLAS GEMM and NCCL collective of every MLP shape at worlds 2, 4, 8. */
export function baselineComparisons(): { gemm: Comparison[]; collective: Comparison[] } {
  const gemm: Comparison[] = [];
  const collective: Comparison[] = [];
  for (const world of [2, 4, 8]) {
    const file = `baselines-h200-2026-11-22/baselines-h200-w${world}-2026-11-22.json`;
    const data = JSON.parse(readFileSync(join(GPU, file), "utf8")) as { mlp: BaselineRow[] };
    for (const m of data.mlp) {
      const ag = m.op === "AG+GEMM";
      const p = predictBaselines({
        hardware: "H200_SXM",
        problem: ag ? { M: m.S, N: m.I / world, K: m.H } : { M: m.S, N: m.H, K: m.I / world },
        collective: { kind: ag ? "all-gather" : "reduce-scatter", shape: [m.S, m.H], dtype: "bf16" },
        world,
      });
      const name = `${m.shape} ${m.op} w${world}`;
      gemm.push(row(file, name, m.gemm_ms, p.gemmMs));
      collective.push(row(file, name, m.collective_ms, p.collectiveMs));
    }
  }
  return { gemm, collective };
}

interface ReduceRow {
  shape: string;
  variant: string;
  warps?: number;
  BLOCK_N?: number;
  unroll?: boolean;
  hoist?: boolean;
  sys?: boolean;
  waits?: boolean;
  old?: boolean;
  programs?: number;
  ms: number;
}

/** Slab of each `rs-reduce` microbenchmark shape: world, rows per rank, N. */
const REDUCE_SLABS: Record<string, { W: number; rows: number; N: number }> = {
  H4096_w2: { W: 2, rows: 4096, N: 4096 },
  H4096_w4: { W: 4, rows: 2048, N: 4096 },
  H8192_w2: { W: 2, rows: 4096, N: 8192 },
};

/**
 * The emitted `rs-reduce` alone (4 warps, 128×128 tiles, ranks unrolled, system-scope waits)
 * against the hardware model's reduction pass: bytes `(W + 1) · rows · N · 2` (every rank's
 * partial read, the sum written), at the measured grid. H200: the quick run (64 and 264
 * programs); H100: the sweep. With `old`, the kernel before vectorisation (scalar loads)
 * against {@link OLD_RS_REDUCE_H200}.
 */
export function reduceKernelComparisons(old = false): { h200: Comparison[]; h100: Comparison[] } {
  const pick = (file: string, hw: HardwareModel): Comparison[] => {
    const data = JSON.parse(readFileSync(join(GPU, "rs-reduce-2026-11-22", file), "utf8")) as { rows: ReduceRow[] };
    return data.rows
      .filter((r) =>
        old
          ? r.old === true
          : r.old === false &&
            r.warps === 4 &&
            r.BLOCK_N === 128 &&
            r.unroll === true &&
            r.hoist === false &&
            r.sys === true &&
            r.waits === true,
      )
      .map((r) => {
        const s = REDUCE_SLABS[r.shape]!;
        return row(file, `${r.shape} P${r.programs}`, r.ms, reducePassMs(hw, (s.W + 1) * s.rows * s.N * 2, r.programs));
      });
  };
  return old
    ? { h200: pick("rs-reduce-h200-quick.json", OLD_RS_REDUCE_H200), h100: [] }
    : { h200: pick("rs-reduce-h200-quick.json", H200_SXM), h100: pick("rs-reduce-h100.json", H100_SXM) };
}

/**
 * H200_SXM with the reduction kernel as it was before its loads were vectorised (the code of
 * suite-2026-11-22's GEMM+RS runs: scalar 16-bit loads, ranks looped, 64 programs): the same
 * law fitted (least squares, relative error) on the `OLD` rows of
 * rs-reduce-2026-11-22/rs-reduce-h200-quick.json (3 slabs × 64 / 264 programs; mean error 5.6%).
 */
export const OLD_RS_REDUCE_H200: HardwareModel = {
  ...H200_AS_OF_2026_11_22,
  reduceKernel: { programs: 64, peakGBps: 1190, halfPrograms: 197, launchUs: 88 },
};

/**
 * The direct ReduceScatter plan as the GEMM+RS emitter realises it (tlx-emitter
 * `rsDeliveries` / `producerOrder`): every partial chunk is pushed by the rank that computed
 * it, straight to the slab owner, on one stream in sending order (rank + 1's slab first,
 * rank − 1's last, the local slab after them all), chunks in row order. Lowered as a
 * producer, the GEMM then computes m-blocks in that order, as the emitted `mblock_order`
 * table makes it.
 */
export function emittedReduceScatter(plan: ChunkPlan): ChunkPlan {
  const W = plan.ranks.length;
  const deliveries: { from: number; to: number; row: number; op: Op }[] = [];
  for (const rp of plan.ranks) {
    for (const ops of rp.streams) {
      for (const op of ops) {
        const row0 = op.src.offsets[0] ?? 0;
        if (op.kind === "local-copy") deliveries.push({ from: rp.rank, to: rp.rank, row: row0, op });
        else if (op.kind === "p2p" && op.side === "pull") {
          const moved = push(rp.rank, op.src, op.dst, {
            deps: op.deps,
            ...(op.reduce === undefined ? {} : { reduce: op.reduce }),
            ...(op.label === undefined ? {} : { label: op.label }),
          });
          deliveries.push({ from: op.peer, to: rp.rank, row: row0, op: moved });
        } else throw new Error(`emittedReduceScatter: ${op.kind} ops are not part of a direct ReduceScatter`);
      }
    }
  }
  const sendOrder = (d: { from: number; to: number }) => (((d.to - d.from - 1) % W) + W) % W;
  const { signals: _signals, ...rest } = plan;
  return {
    ...rest,
    name: `${plan.name} (as emitted)`,
    ranks: plan.ranks.map((rp) => ({
      ...rp,
      streams: [
        deliveries
          .filter((d) => d.from === rp.rank)
          .sort((a, b) => sendOrder(a) - sendOrder(b) || a.row - b.row)
          .map((d) => d.op),
      ],
    })),
  };
}

/** Compute-kernel calibration per role of the emitted GEMM. */
export interface KernelChoice {
  /** The AG+GEMM consumer (persistent TMA GEMM waiting per tile). */
  readonly consumer: "cublas" | "triton";
  /** The GEMM+RS producer. */
  readonly producer: "cublas" | "triton";
}

/**
 * The calibration each emitted kernel is priced with: both the AG+GEMM consumer and the
 * GEMM+RS producer as the emitted Triton persistent TMA GEMM (`tritonGemm`, calibrated on
 * that kernel alone over AG and RS problems: tiles-2026-11-22).
 */
export const MEASURED_KERNELS: KernelChoice = { consumer: "triton", producer: "triton" };

/** What differs between the code versions the runs measured. */
export interface CodeVersion {
  /** Hardware model (the reduction kernel's calibration differs before vectorisation). */
  readonly hardware: HardwareModel;
  /** `rs-reduce` grid. */
  readonly reducePrograms: number;
  /** Whether the SM-push producer's persistent grid leaves the push kernel's SMs free (`num_sms − commSms`). */
  readonly smReserve: boolean;
}

/** suite-2026-11-22 (GEMM+RS of w2-rs-run5): scalar `rs-reduce` on 64 programs. */
export const SUITE1_CODE: CodeVersion = { hardware: OLD_RS_REDUCE_H200, reducePrograms: 64, smReserve: false };
/** suite2 x1: vectorised `rs-reduce` on 264 programs, SM producer on all 132 SMs. */
export const X1_CODE: CodeVersion = { hardware: H200_AS_OF_2026_11_22, reducePrograms: 264, smReserve: false };
/** suite2 x2 (the committed code): `rs-reduce` one program per SM, SM producer on 132 − commSms. */
export const X2_CODE: CodeVersion = { hardware: H200_AS_OF_2026_11_22, reducePrograms: NUM_SMS, smReserve: true };

/** One emitted case: operator, GEMM problem, world, split and, for GEMM+RS, its backend. */
export interface EmittedCase {
  readonly operator: "ag-gemm" | "gemm-rs";
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly world: number;
  readonly split: number;
  readonly backend?: CommBackend;
  /** Communication SMs of the `sm` backend (8 or 16). */
  readonly commSms?: number;
}

/**
 * How a GEMM+RS case's plan is built: `emitted` (default) as the emitter realises it
 * ({@link emittedReduceScatter}), `template` as `reduceScatterDirect` lists it (pulls on
 * the slab owner, own slab first), for comparison.
 */
export type RsPlan = "emitted" | "template";

/** Simulate one emitted case from the plan, split and tiling the suite emitted it from (emit-suite.ts). */
export function simulateCase(
  c: EmittedCase,
  code: CodeVersion = X2_CODE,
  kernels: KernelChoice = MEASURED_KERNELS,
  efficiency = 1,
  rsPlan: RsPlan = "emitted",
): SimulationResult {
  const { M, N, K, world, split } = c;
  if (c.operator === "ag-gemm") {
    const plan = planSignals(
      allGatherSwizzle({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split, side: "push" }),
    );
    const schedule = lowerToTileSchedule(
      plan,
      { tensor: "A", problem: { M, N, K }, tile: TILE, persistent: { numSms: NUM_SMS }, groupSizeM: 8 },
      { role: "consumer" },
    );
    return simulate(plan, schedule, { hardware: code.hardware, computeKernel: { kind: kernels.consumer, efficiency } });
  }
  const backend = c.backend ?? "copy-engine";
  const commSms = c.commSms ?? 8;
  const direct = reduceScatterDirect({
    tensor: { name: "C", shape: [M, N], dtype: "bf16" },
    src: "C_partial",
    axis: 0,
    mesh: [world],
    split,
    afterCompute: true,
  });
  const plan0 = planSignals(rsPlan === "emitted" ? emittedReduceScatter(direct) : direct);
  const numSms = backend === "sm" && code.smReserve ? NUM_SMS - commSms : NUM_SMS;
  const schedule = lowerToTileSchedule(
    plan0,
    { tensor: "C_partial", problem: { M, N, K }, tile: TILE, persistent: { numSms }, groupSizeM: 8 },
    { role: "producer" },
  );
  const plan = applyTileArrivals(plan0, schedule);
  return simulate(plan, schedule, {
    hardware: code.hardware,
    backend,
    ...(backend === "sm" ? { commSms } : {}),
    reduceKernel: { programs: code.reducePrograms },
    computeKernel: { kind: kernels.producer, efficiency },
    // Every suite here predates 2026-11-27: its kernels copied a rank's own partial rows.
    ownPartial: "copied",
  });
}

interface Report {
  shapes: { operator: string; M: number; N: number; K: number };
  world: number;
  times: { maxMedian: number } | null;
  baselines?: { name: string; ms: number }[];
}

const CASE = /^mlp(\d)_w(\d+)_(ag_gemm|gemm_rs_ce|gemm_rs_sm16|gemm_rs_sm)(?:_s(\d+))?$/;

/** Parse a suite case name; null for cases the model does not price (TLX kernels). */
export function parseCase(name: string, r: Report): (EmittedCase & { mlp: number; op: Operator }) | null {
  const m = CASE.exec(name);
  if (m === null) return null;
  const [, mlp, , kind, split] = m;
  const { M, N, K } = r.shapes;
  const base = { M, N, K, world: r.world, split: Number(split ?? "1"), mlp: Number(mlp) };
  if (kind === "ag_gemm") return { ...base, operator: "ag-gemm", op: "AG+GEMM" };
  if (kind === "gemm_rs_ce") return { ...base, operator: "gemm-rs", backend: "copy-engine", op: "GEMM+RS ce" };
  return { ...base, operator: "gemm-rs", backend: "sm", commSms: kind === "gemm_rs_sm16" ? 16 : 8, op: "GEMM+RS sm" };
}

function compareFile(
  dir: string,
  file: string,
  code: CodeVersion,
  kernels: KernelChoice,
  efficiency: number,
  keep: (c: EmittedCase & { op: Operator }) => boolean = () => true,
  plan: RsPlan = "emitted",
): KernelComparison[] {
  const data = JSON.parse(readFileSync(join(GPU, dir, file), "utf8")) as Record<string, Report>;
  const out: KernelComparison[] = [];
  for (const [name, r] of Object.entries(data)) {
    if (r.times === null) continue;
    const c = parseCase(name, r);
    if (c === null || !keep(c)) continue;
    const predicted = simulateCase(c, code, kernels, efficiency, plan).latencyMs;
    const runGemmMs = r.baselines?.find((b) => b.name === "torch-gemm")?.ms;
    const modelGemmMs = gemmMs(H200_SXM, { M: c.M, N: c.N, K: c.K });
    out.push({
      ...row(file, name, r.times.maxMedian, predicted),
      operator: c.op,
      world: c.world,
      mlp: c.mlp,
      modelGemmMs,
      ...(runGemmMs === undefined ? {} : { runGemmMs }),
    });
  }
  return out;
}

/**
 * suite-2026-11-22 (the first runs, 8×H200): AG+GEMM at worlds 2/4/8 (w2-run1, w48-ag-run3;
 * the AG+GEMM kernels are unchanged since, and `copyBandwidthUnderCompute` was fitted on
 * these 12) and the copy-engine GEMM+RS at world 2 (w2-rs-run5, with the scalar `rs-reduce`:
 * priced with {@link SUITE1_CODE}). Its SM-push rows are left out: scalar SM copies and an
 * older emission the model no longer describes.
 */
export function suiteComparisons(kernels: KernelChoice = MEASURED_KERNELS, efficiency = 1): KernelComparison[] {
  const noSm = (c: { op: Operator }) => c.op !== "GEMM+RS sm";
  return ["w2-run1.json", "w48-ag-run3.json", "w2-rs-run5.json"].flatMap((f) =>
    compareFile("suite-2026-11-22", f, SUITE1_CODE, kernels, efficiency, noSm),
  );
}

/**
 * suite2-2026-11-22 (4×H200, worlds 2 and 4), out of sample for every calibration: x1
 * (MLP-1/2; its copy-engine GEMM+RS at world 2 failed) with {@link X1_CODE}, x2 (MLP-1…6,
 * the committed code), x3 (MLP-1/2 again, the same code, run after x2; its wide SM-push
 * variant `_sm16w` is not priced) and x4 (MLP-1/2 at world 4 only, on another machine of the
 * same kind) with {@link X2_CODE}. The SM backend's `smCopy.bandwidthPerSmGBps` is
 * fitted on x2's SM rows, so those are in-sample and x1's SM rows test it.
 */
export function suite2Comparisons(
  kernels: KernelChoice = MEASURED_KERNELS,
  efficiency = 1,
  variant: { plan?: RsPlan; x1?: CodeVersion; x2?: CodeVersion } = {},
): KernelComparison[] {
  const all = () => true;
  return [
    ...["x1-w2.json", "x1-w4.json"].flatMap((f) =>
      compareFile("suite2-2026-11-22", f, variant.x1 ?? X1_CODE, kernels, efficiency, all, variant.plan),
    ),
    ...["x2-w2.json", "x2-w4.json", "x3-w2.json", "x3-w4.json", "x4-w4.json"].flatMap((f) =>
      compareFile("suite2-2026-11-22", f, variant.x2 ?? X2_CODE, kernels, efficiency, all, variant.plan),
    ),
  ];
}

/** The rows of the issue's target: MLP-1/2, AG+GEMM and the copy-engine GEMM+RS, worlds 2 and 4. */
export const inClaim = (r: KernelComparison): boolean => r.mlp <= 2 && r.operator !== "GEMM+RS sm" && r.world <= 4;

/**
 * The copy-engine GEMM+RS model one change at a time, on suite2's rows: mean abs. error of
 * MLP-1/2 (worlds 2, 4) and of MLP-3…6. The previous reduction law: 64 programs × 4.2 GB/s
 * = 269 GB/s whatever the grid, plus a GEMM launch (every row keeps the (W + 1)-slab pass
 * and the per-region waits).
 */
export function gemmRsSteps(): { step: string; mlp12: number; mlp36: number; cases: number }[] {
  const before: HardwareModel = {
    ...H200_AS_OF_2026_11_22,
    reduceKernel: { programs: 64, peakGBps: 268.8, halfPrograms: 0, launchUs: H200_SXM.gemm.launchUs },
  };
  const codes = (hw: HardwareModel) => ({ x1: { ...X1_CODE, hardware: hw }, x2: { ...X2_CODE, hardware: hw } });
  const steps: [string, { plan?: RsPlan; x1?: CodeVersion; x2?: CodeVersion }][] = [
    ["previous reduction law, template plan (pulls on the slab owner)", { plan: "template", ...codes(before) }],
    ["previous reduction law, emitted delivery order", { plan: "emitted", ...codes(before) }],
    ["reduction law of rs-reduce-2026-11-22, emitted delivery order (the model)", {}],
    ["the model with the template plan", { plan: "template" }],
  ];
  return steps.map(([step, v]) => {
    const ce = suite2Comparisons(MEASURED_KERNELS, 1, v).filter((r) => r.operator === "GEMM+RS ce");
    return { step, mlp12: meanAbsError(ce.filter((r) => r.mlp <= 2)), mlp36: meanAbsError(ce.filter((r) => r.mlp > 2)), cases: ce.length };
  });
}

/** Mean of absolute errors. */
export function meanAbsError(rows: readonly Comparison[]): number {
  return rows.reduce((a, r) => a + Math.abs(r.error), 0) / rows.length;
}

/** One operator at one world: cases, mean abs. error, max abs. error, cases within `within`. */
export interface Summary {
  readonly operator: Operator;
  readonly world: number;
  readonly cases: number;
  readonly meanAbs: number;
  readonly maxAbs: number;
  readonly within: number;
}

/** {@link Summary} per operator and world, in that order. */
export function summarize(rows: readonly KernelComparison[], within = 0.15): Summary[] {
  const order: Operator[] = ["AG+GEMM", "GEMM+RS ce", "GEMM+RS sm"];
  const keys = [...new Set(rows.map((r) => `${r.operator}|${r.world}`))].sort((a, b) => {
    const [oa, wa] = a.split("|") as [Operator, string];
    const [ob, wb] = b.split("|") as [Operator, string];
    return order.indexOf(oa) - order.indexOf(ob) || Number(wa) - Number(wb);
  });
  return keys.map((k) => {
    const [operator, world] = k.split("|") as [Operator, string];
    const sel = rows.filter((r) => r.operator === operator && r.world === Number(world));
    return {
      operator,
      world: Number(world),
      cases: sel.length,
      meanAbs: meanAbsError(sel),
      maxAbs: Math.max(...sel.map((r) => Math.abs(r.error))),
      within: sel.filter((r) => Math.abs(r.error) <= within).length,
    };
  });
}

/** One world-`world` prediction of an emitted kernel beside the non-overlapped baselines. */
export interface WorldPrediction {
  readonly mlp: number;
  readonly operator: "AG+GEMM" | "GEMM+RS ce";
  readonly split: number;
  readonly latencyMs: number;
  /** ovl's own kernels one after the other: compute alone + communication alone. */
  readonly nonOverlappedMs: number;
  /** max(compute alone, communication alone). */
  readonly boundMs: number;
  /** nonOverlappedMs / latencyMs. */
  readonly speedup: number;
  /** cuBLAS GEMM then (or after) the NCCL collective, by predictBaselines. */
  readonly cublasNcclMs: number;
}

/** Model predictions (H200_SXM, the committed code) of the suite's MLP-1…6 cases at one world. */
export function predictWorld(world: number, splits: readonly number[] = [1, 2]): WorldPrediction[] {
  const out: WorldPrediction[] = [];
  MLP_SHAPES.forEach(({ S, H, I }, k) => {
    for (const operator of ["AG+GEMM", "GEMM+RS ce"] as const) {
      const ag = operator === "AG+GEMM";
      const problem = ag ? { M: S, N: I / world, K: H } : { M: S, N: H, K: I / world };
      const base = predictBaselines({
        hardware: "H200_SXM",
        problem,
        collective: { kind: ag ? "all-gather" : "reduce-scatter", shape: [S, H], dtype: "bf16" },
        world,
      });
      for (const split of splits) {
        const sim = simulateCase({ operator: ag ? "ag-gemm" : "gemm-rs", ...problem, world, split });
        out.push({
          mlp: k + 1,
          operator,
          split,
          latencyMs: sim.latencyMs,
          nonOverlappedMs: sim.nonOverlappedMs,
          boundMs: sim.boundMs,
          speedup: sim.speedup,
          cublasNcclMs: base.notOverlappedMs,
        });
      }
    }
  });
  return out;
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** A markdown table of comparisons (file column optional), with the mean abs. error. */
export function table(rows: readonly Comparison[], withFile = false): string {
  const lines = withFile
    ? ["| file | case | measured ms | predicted ms | error |", "| --- | --- | ---: | ---: | ---: |"]
    : ["| case | measured ms | predicted ms | error |", "| --- | ---: | ---: | ---: |"];
  for (const r of rows)
    lines.push(
      `| ${withFile ? `${r.file} | ` : ""}${r.name} | ${r.measuredMs.toFixed(3)} | ${r.predictedMs.toFixed(3)} | ${pct(r.error)} |`,
    );
  lines.push(`| mean abs. error |${withFile ? " |" : ""} | | ${pct(meanAbsError(rows))} |`);
  return lines.join("\n");
}

/** A markdown table of {@link summarize}, one block of rows per labelled set. */
export function summaryTable(sets: readonly (readonly [string, readonly KernelComparison[]])[]): string {
  const lines = [
    "| operator | world | runs | cases | mean abs. error | max abs. error | within 15% |",
    "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
  ];
  for (const [label, rows] of sets) {
    for (const s of summarize(rows))
      lines.push(`| ${s.operator} | ${s.world} | ${label} | ${s.cases} | ${pct(s.meanAbs)} | ${pct(s.maxAbs)} | ${s.within} |`);
  }
  return lines.join("\n");
}

/** Comparisons of emitted kernels with the same run's cuBLAS GEMM beside the model's (the machine's state). */
export function kernelTable(rows: readonly KernelComparison[]): string {
  const lines = [
    "| file | case | measured ms | predicted ms | error | same-run cuBLAS GEMM ms | model cuBLAS GEMM ms |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.file} | ${r.name} | ${r.measuredMs.toFixed(3)} | ${r.predictedMs.toFixed(3)} | ${pct(r.error)} | ${r.runGemmMs === undefined ? "—" : r.runGemmMs.toFixed(3)} | ${r.modelGemmMs.toFixed(3)} |`,
    );
  }
  lines.push(`| mean abs. error | | | | ${pct(meanAbsError(rows))} | | |`);
  return lines.join("\n");
}

function worldTable(rows: readonly WorldPrediction[]): string {
  const lines = [
    "| shape | operator | split | predicted ms | non-overlapped (ovl kernels) ms | bound ms | speed-up | cuBLAS + NCCL (predicted) ms | vs cuBLAS + NCCL |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of rows) {
    lines.push(
      `| MLP-${r.mlp} | ${r.operator} | ${r.split} | ${r.latencyMs.toFixed(3)} | ${r.nonOverlappedMs.toFixed(3)} | ${r.boundMs.toFixed(3)} | ${r.speedup.toFixed(2)}× | ${r.cublasNcclMs.toFixed(3)} | ${(r.cublasNcclMs / r.latencyMs).toFixed(2)}× |`,
    );
  }
  return lines.join("\n");
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes("--w8")) {
    console.log(`### World 8, H200_SXM (model predictions)\n\n${worldTable(predictWorld(8))}`);
  } else {
    const { gemm, collective } = baselineComparisons();
    const reduce = reduceKernelComparisons();
    const fresh = suite2Comparisons();
    const run = (x: string) => (r: Comparison) => r.file.startsWith(x);
    const [x1, x2, x3, x4] = [run("x1"), run("x2"), run("x3"), run("x4")];
    const claim = fresh.filter(inClaim);
    const sm12 = fresh.filter((r) => r.mlp <= 2 && r.operator === "GEMM+RS sm");
    const wider = fresh.filter((r) => r.mlp > 2);
    const old = suiteComparisons();
    const steps = gemmRsSteps();
    const stepTable = [
      "| GEMM+RS copy-engine model | MLP-1/2 mean abs. error | MLP-3…6 mean abs. error |",
      "| --- | ---: | ---: |",
      ...steps.map((s) => `| ${s.step} | ${pct(s.mlp12)} | ${pct(s.mlp36)} |`),
    ].join("\n");
    const sections: [string, string][] = [
      [
        "Summary: the issue's target (MLP-1/2, AG+GEMM and GEMM+RS copy engine, worlds 2/4)",
        summaryTable([
          ["x1 … x4", claim],
          ["x1", claim.filter(x1)],
          ["x2", claim.filter(x2)],
          ["x3", claim.filter(x3)],
          ["x4", claim.filter(x4)],
        ]),
      ],
      [
        "Summary: GEMM+RS SM push, MLP-1/2 (smCopy fitted on x2, tested on x1 and x3)",
        summaryTable([
          ["x1 (test)", sm12.filter(x1)],
          ["x2 (fit)", sm12.filter(x2)],
          ["x3 (test)", sm12.filter(x3)],
        ]),
      ],
      ["Summary: MLP-3…6 (x2)", summaryTable([["x2", wider]])],
      ["Summary: suite-2026-11-22 (earlier code and runs)", summaryTable([["suite-2026-11-22", old]])],
      ["The GEMM+RS copy-engine model, one change at a time (suite2)", stepTable],
      ["MLP-1/2, AG+GEMM and GEMM+RS copy engine", kernelTable(claim)],
      ["MLP-1/2, GEMM+RS SM push", kernelTable(sm12)],
      ["MLP-3…6", kernelTable(wider)],
      ["suite-2026-11-22", kernelTable(old)],
      ["rs-reduce alone, H200 (H200_SXM.reduceKernel's data)", table(reduce.h200)],
      ["rs-reduce alone, H100 (H100_SXM.reduceKernel's data)", table(reduce.h100)],
      ["rs-reduce alone before vectorisation, H200 (OLD_RS_REDUCE_H200's data)", table(reduceKernelComparisons(true).h200)],
      ["GEMM alone (cuBLAS)", table(gemm)],
      ["Collective alone (NCCL)", table(collective)],
    ];
    console.log(sections.map(([h, t]) => `### ${h}\n\n${t}`).join("\n\n"));
  }
}
