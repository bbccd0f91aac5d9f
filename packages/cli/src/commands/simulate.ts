// `ovl simulate`: predict a fused operator on a built-in hardware model (H100_SXM,
// H200_SXM): latency per rank, the non-overlapped time, the perfect-overlap bound,
// TileLink's overlap ratio, and the per-rank timeline (JSON, or an SVG chart).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import { allReduceOptions, HARDWARE_MODELS, predictBaselines, simulate, timelineChart, type SimulationResult } from "@ovl/sim";
import { DEFAULT_COMM_SMS } from "@ovl/tlx-emitter";
import { buildPlan, buildSchedule, consumes } from "../build.js";
import { modelCommSms } from "../comm-sms.js";
import { UsageError } from "../errors.js";
import type { CommandOutput } from "../io.js";
import { describeProblem, type Problem } from "../problem.js";
import { unknownNameMessage } from "../suggest.js";

/** The built-in hardware models' names. */
export const DEVICES = Object.keys(HARDWARE_MODELS);

/** Parse `--device`: a built-in model's name (`h200` and `H200` are read as `H200_SXM`). */
export function parseDevice(input: string | undefined): string {
  if (input === undefined) return "H200_SXM";
  const exact = DEVICES.find(
    (d) => d === input || d.toLowerCase() === `${input.toLowerCase()}_sxm` || d.toLowerCase() === input.toLowerCase(),
  );
  if (exact !== undefined) return exact;
  throw new UsageError("usage", `${unknownNameMessage("device", input, DEVICES)} (--device)`);
}

/** The collective each fused operator's path without overlap runs beside its GEMM. */
const COLLECTIVE = {
  "ag-gemm": "all-gather",
  "gemm-rs": "reduce-scatter",
  "gemm-ar": "all-reduce",
  "a2a-gemm": "all-to-all",
} as const;

/** A simulation and the non-overlapped baseline it is compared with. */
export interface Prediction {
  readonly plan: ChunkPlan;
  readonly schedule: TileSchedule;
  readonly sim: SimulationResult;
  /** cuBLAS-class GEMM, then the NCCL-like collective (the path without overlap), ms. */
  readonly notOverlappedMs: number;
  /** `notOverlappedMs / latency`: above 1 when overlapping wins. */
  readonly speedup: number;
  /** `bound / latency`: how close to perfect overlap (1 = at the bound). */
  readonly fractionOfBound: number;
}

/**
 * Plan, lower and simulate `p` on `device` (the fused GEMM as the emitted Triton kernel).
 * `notifyAt` (default `"next-tile"`, as GEMM+RS and GEMM+AR compile their producers): when the producer notifies its tiles.
 */
export function predict(p: Problem, device: string, commSms?: number, notifyAt: "tile" | "next-tile" = "next-tile"): Prediction {
  if (p.operator !== "ag-gemm" && p.operator !== "gemm-rs" && p.operator !== "gemm-ar" && p.operator !== "a2a-gemm") {
    throw new UsageError(
      "unsupported",
      `ovl simulate predicts fused operators (ag-gemm, gemm-rs, gemm-ar, a2a-gemm), not ${p.operator}; try: ovl simulate ag-gemm --shape MLP-1 --world 8`,
    );
  }
  if (p.backend === "nvshmem") {
    throw new UsageError(
      "unsupported",
      "the simulator has no model of NVSHMEM puts; simulate --backend sm (device-initiated stores, as close as it models) or copy-engine, and measure nvshmem on GPUs",
    );
  }
  // The tile-wise AllReduce is priced as the tuner prices it: the partitioned plan at one
  // chunk per m-block, reduced on its communication SMs beside the GEMM (SM pushes).
  const tilewise = p.operator === "gemm-ar" && p.template === "tilewise";
  const rows = p.M / p.world;
  const backend = tilewise ? "sm" : p.backend;
  const priced: Problem = tilewise ? { ...p, template: "direct", split: Math.max(1, Math.floor(rows / p.tile.BM)), backend } : p;
  const plan = buildPlan(priced);
  // GEMM+RS and the partitioned GEMM+AR over SM pushes get the push SMs `ovl emit` gives them (chooseCommSms on
  // this model), unless named; other SM kernels the emitter's default.
  const hw = HARDWARE_MODELS[device];
  const sms = commSms ?? (hw === undefined ? undefined : modelCommSms(p, hw)?.commSms) ?? DEFAULT_COMM_SMS;
  // Over SM pushes the emitted producer leaves the push kernel's SMs free: its persistent grid is smaller.
  const pushSms = backend === "sm" ? sms : 0;
  const schedule = buildSchedule({ ...priced, numSms: Math.max(1, priced.numSms - pushSms) }, plan);
  // The fused GEMM is what ovl emits: the Triton kernel, priced by the model's calibration of it.
  const triton = hw?.tritonGemm !== undefined;
  const sim = simulate(plan, schedule, {
    hardware: device,
    backend,
    ...(backend === "sm" || commSms !== undefined ? { commSms: sms } : {}),
    ...(triton ? { computeKernel: { kind: "triton" as const } } : {}),
    ...(p.operator === "gemm-ar" ? allReduceOptions(tilewise ? "tilewise" : "partitioned", backend, sms) : {}),
    notifyAt,
  });
  // The collective of the path without overlap: over A [M×K] before the GEMM (AG, A2A), over C [M×N] after it.
  const before = consumes(p);
  const base = predictBaselines({
    hardware: device,
    problem: { M: p.M, N: p.N, K: p.K },
    collective: {
      kind: COLLECTIVE[p.operator],
      shape: before ? [p.M, p.K] : [p.M, p.N],
      dtype: "bf16",
    },
    world: p.world,
  });
  return {
    plan,
    schedule,
    sim,
    notOverlappedMs: base.notOverlappedMs,
    speedup: base.notOverlappedMs / sim.latencyMs,
    fractionOfBound: sim.boundMs / sim.latencyMs,
  };
}

/** The summary lines of a prediction. */
export function predictionLines(pr: Prediction): string[] {
  const s = pr.sim;
  const ms = (v: number) => `${v.toFixed(3)} ms`;
  const lines = [
    `  predicted latency   ${ms(s.latencyMs)} (slowest rank)`,
    `  not overlapped      ${ms(pr.notOverlappedMs)} (GEMM, then the NCCL collective) → overlapping is ${pr.speedup.toFixed(2)}× ${pr.speedup >= 1 ? "faster" : "SLOWER: use the non-overlapped path"}`,
    `  this plan, serial   ${ms(s.nonOverlappedMs)} (its compute alone ${ms(s.computeAloneMs)} + its communication alone ${ms(s.commAloneMs)})`,
    `  perfect-overlap bound ${ms(s.boundMs)} → ${(pr.fractionOfBound * 100).toFixed(0)}% of the bound; overlap ratio ${s.overlapRatio.toFixed(2)} (TileLink: communication hidden)`,
  ];
  if (s.ranks.length <= 16) {
    lines.push(`  per rank: ${s.ranks.map((r) => `r${r.rank} ${r.latencyMs.toFixed(3)}`).join("  ")}`);
  }
  return lines;
}

/** Write the timeline chart of a simulation. */
export async function writeTimeline(sim: SimulationResult, file: string, title: string): Promise<string> {
  const path = resolve(file);
  mkdirSync(dirname(path), { recursive: true });
  // Eight ranks of lanes stay readable; past that, the first four and the slowest.
  const slowest = [...sim.ranks].sort((a, b) => b.latencyMs - a.latencyMs)[0]?.rank ?? 0;
  const ranks = sim.ranks.length <= 8 ? undefined : [...new Set([0, 1, 2, 3, slowest])];
  writeFileSync(path, await timelineChart(sim, { title, ...(ranks ? { ranks } : {}) }));
  return path;
}

/** Run `ovl simulate`. */
export async function simulateCommand(
  p: Problem,
  o: { device?: string; commSms?: number; svg?: string; out?: string },
): Promise<CommandOutput> {
  const device = parseDevice(o.device);
  const pr = predict(p, device, o.commSms);
  const lines = [
    `${pr.plan.name} on ${device} (${p.backend}${pr.sim.commSms > 0 ? `, ${pr.sim.commSms} comm SMs` : ""}): ${describeProblem(p)}`,
    ...predictionLines(pr),
  ];
  const files: string[] = [];
  if (o.out !== undefined) {
    const path = resolve(o.out);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, `${JSON.stringify(pr.sim, null, 1)}\n`);
    files.push(path);
  }
  if (o.svg !== undefined) files.push(await writeTimeline(pr.sim, o.svg, `${pr.plan.name} on ${device}`));
  lines.push(...files.map((f) => `wrote ${f}`));
  const { ranks, ...figures } = pr.sim;
  return {
    json: {
      ...figures,
      notOverlappedMs: pr.notOverlappedMs,
      speedupOverNotOverlapped: pr.speedup,
      fractionOfBound: pr.fractionOfBound,
      ranks: ranks.map(({ events, ...r }) => ({ ...r, events: events.length })),
      files,
    },
    lines,
  };
}
