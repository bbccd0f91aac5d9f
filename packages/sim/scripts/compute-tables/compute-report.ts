// The report of a compute benchmark run (compute_bench.py in bench mode): per shape the tuned
// kernel compile() emits (with its waits or notifies) against cuBLAS in the same run, the same
// configuration as the plain body, the previous fixed default, the share of the dense bf16
// peak, and the simulator's compute-time prediction (and the compute-configuration model's)
// against the measured time; a chart of the TFLOP/s.
//   tsx scripts/compute-tables/compute-report.ts <results-folder> [--device h100]
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { lowerToTileSchedule } from "@ovl/chunk-plan";
import { TARGETS, type TargetName } from "@ovl/primitives";
import {
  COMPUTE_BODIES,
  computeModel,
  gemmMs,
  latencyBarSpec,
  predictComputeMs,
  renderSvg,
  resolveHardware,
  simulate,
  type ComputeConfig,
  type HardwareModel,
} from "../../src/index.js";
import { shapeOperator } from "./compute-cases.js";
import type { ComputeResults, ResultCase, ResultShape } from "./compute-table.js";
import { correct, gmean } from "./compute-table.js";

/** One row of the report. */
export interface ReportRow {
  readonly shape: string;
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly config: string;
  readonly cublasTflops: number;
  readonly tunedTflops: number;
  /** cuBLAS time over the tuned kernel's time (> 1: faster than cuBLAS). */
  readonly vsCublas: number;
  readonly plainTflops: number;
  /** Plain body's time over the emitted kernel's (< 1: the waits or notifies cost that much). */
  readonly plainOverEmitted: number;
  readonly previousVsCublas: number;
  /** Tuned kernel's TFLOP/s over the target's dense bf16 rate. */
  readonly ofPeak: number;
  readonly measuredMs: number;
  readonly simMs: number;
  readonly simError: number;
  readonly modelMs: number;
  readonly modelError: number;
  readonly simCublasMs: number;
  readonly simCublasError: number;
}

function role(s: ResultShape, r: string): (ResultCase & { ms: number }) | undefined {
  return s.cases.find((c): c is ResultCase & { ms: number } => c.role === r && correct(c));
}

const key = (c: ComputeConfig) => `${c.body.replace("gemm_", "")} ${c.BM}×${c.BN}×${c.BK} g${c.groupM} s${c.numStages} w${c.numWarps}`;

/** The simulator's time of the shape's compute kernel alone at `c` (the emitted Triton kernel's calibration of `hardware`). */
export function simulatedMs(s: ResultShape, c: ComputeConfig, hardware: string | HardwareModel): number {
  const op = shapeOperator(s);
  const schedule = lowerToTileSchedule(
    op.plan,
    {
      tensor: s.op === "ag-gemm" ? "A" : "C_partial",
      problem: { M: s.M, N: s.N, K: s.K },
      tile: { BM: c.BM, BN: c.BN, BK: c.BK },
      groupSizeM: c.groupM,
      persistent: { numSms: 132 },
    },
    { role: s.role },
  );
  const tail = COMPUTE_BODIES.find((b) => b.name === c.body)?.tail ?? "wave";
  return simulate(op.plan, schedule, { hardware, computeKernel: { kind: "triton", tail } }).computeAloneMs;
}

/** The rows of `results` (bench mode). */
export function reportRows(results: ComputeResults, target: TargetName, hardware: string): ReportRow[] {
  const peak = TARGETS[target].denseBf16Tflops;
  const model = computeModel(target);
  const hw = resolveHardware(hardware);
  return results.shapes.flatMap((s) => {
    const t = role(s, "tuned");
    const p = role(s, "tuned-plain");
    const prev = role(s, "previous");
    if (t === undefined || p === undefined || prev === undefined) return [];
    const tflops = (ms: number) => s.flops / ms / 1e9;
    const simMs = simulatedMs(s, t.config, hardware);
    const modelMs = predictComputeMs({ role: s.role, M: s.M, N: s.N, K: s.K, dtype: "bf16" }, t.config, model);
    const simCublasMs = gemmMs(hw, { M: s.M, N: s.N, K: s.K });
    return [
      {
        shape: s.name,
        M: s.M,
        N: s.N,
        K: s.K,
        config: key(t.config),
        cublasTflops: tflops(s.cublas.ms),
        tunedTflops: tflops(t.ms),
        vsCublas: s.cublas.ms / t.ms,
        plainTflops: tflops(p.ms),
        plainOverEmitted: p.ms / t.ms,
        previousVsCublas: s.cublas.ms / prev.ms,
        ofPeak: tflops(t.ms) / peak,
        measuredMs: t.ms,
        simMs,
        simError: simMs / t.ms - 1,
        modelMs,
        modelError: modelMs / t.ms - 1,
        simCublasMs,
        simCublasError: simCublasMs / s.cublas.ms - 1,
      },
    ];
  });
}

const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
const signed = (x: number) => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}%`;
const meanAbs = (xs: readonly number[]) => xs.reduce((a, x) => a + Math.abs(x), 0) / xs.length;

/** The markdown table and its summary lines. */
export function reportMarkdown(rows: readonly ReportRow[], peak: number, hardware = "H100_SXM"): string {
  const head =
    "| shape | M×N×K | tuned configuration | tuned TFLOP/s | cuBLAS TFLOP/s | vs cuBLAS | plain body TFLOP/s | plain ÷ emitted | previous default vs cuBLAS | of dense peak | measured ms | simulator ms (error) | model ms (error) |\n" +
    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |";
  const lines = rows.map(
    (r) =>
      `| ${r.shape} | ${r.M}×${r.N}×${r.K} | ${r.config} | ${r.tunedTflops.toFixed(0)} | ${r.cublasTflops.toFixed(0)} | ${pct(r.vsCublas)} | ${r.plainTflops.toFixed(0)} | ${r.plainOverEmitted.toFixed(3)} | ${pct(r.previousVsCublas)} | ${pct(r.ofPeak)} | ${r.measuredMs.toFixed(3)} | ${r.simMs.toFixed(3)} (${signed(r.simError)}) | ${r.modelMs.toFixed(3)} (${signed(r.modelError)}) |`,
  );
  const part = (name: string, f: (r: ReportRow) => boolean) => {
    const xs = rows.filter(f).map((r) => r.vsCublas);
    return `${name}: geometric mean ${pct(gmean(xs))}, min ${pct(Math.min(...xs))}, ${xs.filter((x) => x < 0.95).length} of ${xs.length} below 95%`;
  };
  const summary = [
    `- Tuned emitted kernel vs cuBLAS — ${part("all 36", () => true)}; ${part("AG+GEMM", (r) => r.shape.startsWith("ag"))}; ${part("GEMM+RS", (r) => r.shape.startsWith("rs"))}.`,
    `- Previous fixed default (128×256×64, GROUP_M 8, 3 stages, 8 warps, base bodies) vs cuBLAS in the same run: geometric mean ${pct(gmean(rows.map((r) => r.previousVsCublas)))}, min ${pct(Math.min(...rows.map((r) => r.previousVsCublas)))}.`,
    `- The same tuned configuration as the plain body (no waits / notifies) vs cuBLAS: geometric mean ${pct(gmean(rows.map((r) => r.vsCublas / r.plainOverEmitted)))}; plain ÷ emitted time: AG+GEMM ${gmean(rows.filter((r) => r.shape.startsWith("ag")).map((r) => r.plainOverEmitted)).toFixed(3)}, GEMM+RS ${gmean(rows.filter((r) => r.shape.startsWith("rs")).map((r) => r.plainOverEmitted)).toFixed(3)} (geometric means; below 1: the waits or notifies cost that much).`,
    `- Tuned kernels reach ${pct(Math.min(...rows.map((r) => r.ofPeak)))}–${pct(Math.max(...rows.map((r) => r.ofPeak)))} of the dense bf16 rate of the target table (${peak} TFLOP/s); cuBLAS ${pct(Math.min(...rows.map((r) => r.cublasTflops / peak)))}–${pct(Math.max(...rows.map((r) => r.cublasTflops / peak)))}.`,
    `- Simulator (${hardware}, the emitted Triton kernel's calibration) against the measured tuned kernel: mean absolute error ${pct(meanAbs(rows.map((r) => r.simError)))}, from ${signed(Math.min(...rows.map((r) => r.simError)))} to ${signed(Math.max(...rows.map((r) => r.simError)))}; its cuBLAS prediction against measured cuBLAS: mean absolute error ${pct(meanAbs(rows.map((r) => r.simCublasError)))}. The compute-configuration model (sim's \`predictComputeMs\`): mean absolute error ${pct(meanAbs(rows.map((r) => r.modelError)))}, from ${signed(Math.min(...rows.map((r) => r.modelError)))} to ${signed(Math.max(...rows.map((r) => r.modelError)))}.`,
  ];
  return `${head}\n${lines.join("\n")}\n\n${summary.join("\n")}\n`;
}

async function main(): Promise<void> {
  const dir = process.argv[2];
  if (dir === undefined) {
    console.error("usage: tsx scripts/compute-tables/compute-report.ts <results-folder> [--device h100]");
    process.exit(2);
  }
  const di = process.argv.indexOf("--device");
  const target = (di >= 0 ? process.argv[di + 1] : "h100") as TargetName;
  const hardware = `${target.toUpperCase()}_SXM`;
  const results = JSON.parse(readFileSync(join(dir, `bench-${target}.json`), "utf8")) as ComputeResults;
  const rows = reportRows(results, target, hardware);
  writeFileSync(join(dir, `report-${target}.json`), `${JSON.stringify(rows, null, 1)}\n`);
  writeFileSync(join(dir, `table-${target}.md`), reportMarkdown(rows, TARGETS[target].denseBf16Tflops, hardware));
  const chartRows = rows.flatMap((r) => [
    { case: r.shape, series: "tuned, emitted (waits/notifies)", ms: r.tunedTflops },
    { case: r.shape, series: "tuned, plain body", ms: r.plainTflops },
    { case: r.shape, series: "previous default, emitted", ms: r.cublasTflops * r.previousVsCublas },
    { case: r.shape, series: "cuBLAS (torch.matmul)", ms: r.cublasTflops },
  ]);
  const spec = latencyBarSpec(chartRows, {
    title: `Per-rank compute of MLP-1…6 at worlds 2/4/8, ${results.device}, bf16`,
    subtitle: `${results.method.split(";")[0]}; TFLOP/s (higher is better); dense peak ${TARGETS[target].denseBf16Tflops}`,
    step: 5,
  }) as { encoding: { y: { title: string } } };
  spec.encoding.y.title = "TFLOP/s (higher is better)";
  writeFileSync(join(dir, `compute-${target}.svg`), await renderSvg(spec as Parameters<typeof renderSvg>[0]));
  console.log(reportMarkdown(rows, TARGETS[target].denseBf16Tflops, hardware));
}

if (process.argv[1]?.endsWith("compute-report.ts")) await main();
