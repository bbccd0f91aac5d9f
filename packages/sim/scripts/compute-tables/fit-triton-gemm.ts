// Fits a hardware model's `tritonGemm` calibration (the emitted Triton GEMM alone: launch +
// wave-quantised rounds of tiles at an efficiency, one factor per tile shape) to the tuned
// kernels of a compute_bench.py bench run, and checks it on other runs:
//   tsx scripts/compute-tables/fit-triton-gemm.ts <results.json> <H200_SXM|H100_SXM> [--check other.json ...]
// Per shape the simulator's own rounds give T0 (the time at efficiency 1, no launch); the
// model is T = launch + T0 / (efficiency · factor[tile]); launch and one 1/(efficiency·factor)
// per tile shape are the least-squares solution of the relative error (weights 1/measured),
// launch held at 0 if it comes out negative. efficiency is the 128×256×64 tile's; the other
// tiles' factors are relative to it.
import { readFileSync } from "node:fs";
import { resolveHardware, type HardwareModel } from "../../src/index.js";
import { simulatedMs } from "./compute-report.js";
import { type ComputeResults, type ResultShape, tunedCase } from "./compute-table.js";

/** One shape's tuned kernel: its tile, the simulator's time at efficiency 1 without launch, and the measured time. */
export interface FitPoint {
  readonly shape: string;
  readonly tile: string;
  readonly t0Ms: number;
  readonly ms: number;
}

/** The fitted calibration. */
export interface TritonFit {
  readonly launchUs: number;
  /** 1 / (efficiency · factor) per tile key `BMxBNxBK`. */
  readonly inverse: Readonly<Record<string, number>>;
}

const REFERENCE_TILE = "128x256x64";

/** The points of a run: every shape with a correct `tuned` case, priced by the simulator at efficiency 1. */
export function fitPoints(results: ComputeResults, hw: HardwareModel): FitPoint[] {
  const bare: HardwareModel = { ...hw, tritonGemm: { efficiency: 1, launchUs: 0 } };
  return results.shapes.flatMap((s: ResultShape) => {
    const t = tunedCase(s);
    if (t === undefined) return [];
    const c = t.config;
    const t0Ms = simulatedMs(s, c, bare);
    return [{ shape: s.name, tile: `${c.BM}x${c.BN}x${c.BK}`, t0Ms, ms: t.ms }];
  });
}

/** Solves the small dense system `a x = b` (Gaussian elimination with partial pivoting). */
function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(m[r]![col]!) > Math.abs(m[pivot]![col]!)) pivot = r;
    [m[col], m[pivot]] = [m[pivot]!, m[col]!];
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = m[r]![col]! / m[col]![col]!;
      for (let k = col; k <= n; k++) m[r]![k]! -= f * m[col]![k]!;
    }
  }
  return m.map((row, i) => row[n]! / row[i]!);
}

/** The least-squares calibration of `points` (relative error); launch held at 0 when negative. */
export function fitTriton(points: readonly FitPoint[]): TritonFit {
  const tiles = [...new Set(points.map((p) => p.tile))];
  const solveWith = (withLaunch: boolean): number[] => {
    // Unknowns: [launchMs?, inverse per tile]; rows: (launch + t0 · inv[tile]) / ms ≈ 1.
    const n = tiles.length + (withLaunch ? 1 : 0);
    const ata = Array.from({ length: n }, () => new Array<number>(n).fill(0));
    const atb = new Array<number>(n).fill(0);
    for (const p of points) {
      const row = new Array<number>(n).fill(0);
      if (withLaunch) row[0] = 1 / p.ms;
      row[(withLaunch ? 1 : 0) + tiles.indexOf(p.tile)] = p.t0Ms / p.ms;
      for (let i = 0; i < n; i++) {
        atb[i]! += row[i]!;
        for (let j = 0; j < n; j++) ata[i]![j]! += row[i]! * row[j]!;
      }
    }
    return solve(ata, atb);
  };
  let x = solveWith(true);
  let launchMs = x[0]!;
  if (!(launchMs >= 0)) {
    x = [0, ...solveWith(false)];
    launchMs = 0;
  }
  return { launchUs: launchMs * 1e3, inverse: Object.fromEntries(tiles.map((t, i) => [t, x[i + 1]!])) };
}

/** The calibration as a hardware model's `tritonGemm` (efficiency of the reference tile, factors of the others). */
export function asCalibration(fit: TritonFit): NonNullable<HardwareModel["tritonGemm"]> {
  const ref = fit.inverse[REFERENCE_TILE] ?? Object.values(fit.inverse)[0]!;
  const round = (x: number) => Number(x.toFixed(3));
  return {
    efficiency: round(1 / ref),
    launchUs: Number(fit.launchUs.toFixed(1)),
    tiles: Object.entries(fit.inverse)
      .filter(([t]) => t !== REFERENCE_TILE)
      .map(([t, inv]) => {
        const [BM, BN, BK] = t.split("x").map(Number) as [number, number, number];
        return { BM, BN, BK, efficiency: round(ref / inv) };
      }),
  };
}

/** Relative errors of `calibration` on `points` (a tile it has no factor for takes factor 1). */
export function errors(points: readonly FitPoint[], calibration: NonNullable<HardwareModel["tritonGemm"]>): number[] {
  return points.map((p) => {
    const [BM, BN, BK] = p.tile.split("x").map(Number);
    const factor = calibration.tiles?.find((t) => t.BM === BM && t.BN === BN && t.BK === BK)?.efficiency ?? 1;
    return (calibration.launchUs * 1e-3 + p.t0Ms / (calibration.efficiency * factor)) / p.ms - 1;
  });
}

function summary(name: string, points: readonly FitPoint[], errs: readonly number[]): string {
  const abs = errs.map(Math.abs);
  const worst = abs.indexOf(Math.max(...abs));
  return `${name}: ${points.length} shapes, mean |error| ${((100 * abs.reduce((a, b) => a + b, 0)) / abs.length).toFixed(1)}%, max ${(100 * abs[worst]!).toFixed(1)}% (${points[worst]!.shape}), ${abs.filter((e) => e > 0.15).length} beyond 15%`;
}

function main(argv: readonly string[]): void {
  const [file, hardware] = argv;
  if (file === undefined || hardware === undefined) {
    console.error("usage: tsx scripts/compute-tables/fit-triton-gemm.ts <results.json> <H200_SXM|H100_SXM> [--check other.json ...]");
    process.exit(2);
  }
  const hw = resolveHardware(hardware);
  const read = (f: string) => JSON.parse(readFileSync(f, "utf8")) as ComputeResults;
  const points = fitPoints(read(file), hw);
  const calibration = asCalibration(fitTriton(points));
  const i = argv.indexOf("--check");
  const checks = i < 0 ? [] : argv.slice(i + 1);
  console.log(JSON.stringify(calibration));
  console.log(summary(`current ${hw.name} calibration, in sample`, points, errors(points, hw.tritonGemm!)));
  console.log(summary("fitted, in sample", points, errors(points, calibration)));
  for (const c of checks) {
    const p = fitPoints(read(c), hw);
    console.log(summary(`current, ${c}`, p, errors(p, hw.tritonGemm!)));
    console.log(summary(`fitted, ${c}`, p, errors(p, calibration)));
  }
}

if (process.argv[1]?.endsWith("fit-triton-gemm.ts")) main(process.argv.slice(2));
