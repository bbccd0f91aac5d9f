// `ovl tune`: search split × backend × comm SMs × tile × swizzle for a fused operator,
// ranked by the simulator on a hardware model; with --gpus N, measure the best k through
// the runner and keep the fastest. Results are cached by (operator, shape, world, device).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import {
  DEFAULT_TUNE_SPACE,
  DEVICE_MEMORY_BYTES,
  emptyTuneCache,
  HOPPER_SHARED_BYTES,
  parseTuneCache,
  serializeTuneCache,
  simulatorCost,
  storeTune,
  tune,
  type Candidate,
  type RankedCandidate,
  type TuneResult,
  type TuneSpace,
} from "@ovl/sim";
import { runManifest } from "@ovl/runtime-py";
import { UsageError } from "../errors.js";
import { ProgressBar, type CommandOutput, type Io } from "../io.js";
import { describeProblem, type Problem } from "../problem.js";
import { emitProblem } from "./emit.js";
import { parseDevice } from "./simulate.js";
import { checkMeasuredProblem, figureLines, measuredFrom, readTuneMeasurements } from "./tune-measurements.js";

/** Flags of `ovl tune`. */
export interface TuneFlags {
  device?: string;
  topK?: number;
  cache?: string | false;
  gpus?: number;
  python?: string;
  /** A measurements file (`ovl.tune-measurements/v1`) of a GPU run, used in place of `--gpus`. */
  measurements?: string;
}

/** The default cache file. */
export const DEFAULT_CACHE = ".ovl-tune-cache.json";

/** The `ovl emit` flags that reproduce a candidate of `p`. */
export function emitFlags(p: Problem, c: Candidate): string {
  const shape = p.shapeName !== undefined ? `--shape ${p.shapeName}` : `--m ${p.M} --n ${p.N} --k ${p.K}`;
  if (c.path === "sequential") return "";
  const backend = c.backend === "sm" ? ` --backend sm` : "";
  const template = c.allReduce === "tilewise" ? " --template tilewise" : "";
  return `ovl emit ${p.operator} ${shape} --world ${p.world}${template} --split ${c.split} --tile ${c.tile.BM}x${c.tile.BN}x${c.tile.BK} --group-m ${c.groupSizeM}${backend}`;
}

function problemWith(p: Problem, c: Candidate & { path: "overlapped" }): Problem {
  return {
    ...p,
    template: p.operator === "ag-gemm" ? "swizzle" : c.allReduce === "tilewise" ? "tilewise" : "direct",
    side: "push",
    split: c.split,
    backend: c.backend,
    tile: c.tile,
    groupSizeM: c.groupSizeM,
    // A candidate is measured with its own tile, not the tuned table's.
    named: { tile: true, groupM: true },
  };
}

/** A `measure` that emits a candidate and runs it on `gpus` GPUs; the sequential path is the runner's GEMM-then-collective baseline. */
function gpuMeasure(p: Problem, gpus: number, python: string | undefined): (r: RankedCandidate) => Promise<number | undefined> {
  return async (r) => {
    const dir = mkdtempSync(join(tmpdir(), "ovl-tune-"));
    try {
      const c = r.candidate;
      const q =
        c.path === "overlapped"
          ? problemWith(p, c)
          : { ...p, template: p.operator === "ag-gemm" ? ("swizzle" as const) : ("direct" as const), split: 1 };
      const e = await emitProblem(q, dir, { timing: { warmup: 5, reps: 30, checkRuns: 2 } });
      const report = await runManifest(e.manifestPath, {
        nproc: gpus,
        ...(c.path === "sequential" ? { baselines: true } : {}),
        ...(python !== undefined ? { python } : {}),
      });
      if (c.path === "sequential") return report.baselines.find((b) => /-then-/.test(b.name))?.ms ?? undefined;
      return report.times?.maxMedian;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** The space searched for `operator`: AG+GEMM with the copy engine only, since that is what `ovl emit` produces for it. */
export function searchSpace(operator: "ag-gemm" | "gemm-rs" | "gemm-ar"): TuneSpace {
  return operator === "ag-gemm" ? { ...DEFAULT_TUNE_SPACE, backends: ["copy-engine"] } : DEFAULT_TUNE_SPACE;
}

/** Memory limits of a built-in hardware model (Hopper shared memory). */
export function deviceMemory(device: string): { globalBytes: number; sharedBytesPerBlock: number } {
  return { globalBytes: DEVICE_MEMORY_BYTES[device] ?? 80e9, sharedBytesPerBlock: HOPPER_SHARED_BYTES };
}

/** Run `ovl tune`. */
export async function tuneCommand(p: Problem, flags: TuneFlags, io: Io): Promise<CommandOutput & { result: TuneResult }> {
  if (p.operator !== "ag-gemm" && p.operator !== "gemm-rs" && p.operator !== "gemm-ar") {
    throw new UsageError("unsupported", `ovl tune searches fused operators (ag-gemm, gemm-rs, gemm-ar), not ${p.operator}`);
  }
  if (flags.gpus !== undefined && flags.gpus !== p.world)
    throw new UsageError("bad-mesh", `--gpus ${flags.gpus} must equal the world: use --world ${flags.gpus}`);
  if (flags.gpus !== undefined && flags.measurements !== undefined)
    throw new UsageError("usage", "give --gpus (measure here) or --measurements (times of an earlier GPU run), not both");
  const measurements = flags.measurements === undefined ? undefined : readTuneMeasurements(flags.measurements);
  if (measurements !== undefined) checkMeasuredProblem(measurements, p, flags.measurements!);
  const device = parseDevice(flags.device);
  const cachePath = flags.cache === false ? undefined : resolve(flags.cache ?? DEFAULT_CACHE);
  const cache = cachePath !== undefined && existsSync(cachePath) ? parseTuneCache(readFileSync(cachePath, "utf8")) : emptyTuneCache();
  const space = searchSpace(p.operator);
  const bar = new ProgressBar(io, "tune");
  const measureBar = new ProgressBar(io, "measure");
  const result = await tune(
    { operator: p.operator, M: p.M, N: p.N, K: p.K, world: p.world },
    {
      cost: simulatorCost(device),
      memory: deviceMemory(device),
      device:
        flags.gpus !== undefined
          ? `${device} measured on ${flags.gpus} GPUs`
          : measurements !== undefined
            ? `${device} measured on ${measurements.device}`
            : device,
      space,
      numSms: p.numSms,
      topK: flags.topK ?? 3,
      cache,
      ...(flags.gpus !== undefined ? { measure: gpuMeasure(p, flags.gpus, flags.python) } : {}),
      ...(measurements !== undefined ? { measure: measuredFrom(measurements) } : {}),
      onProgress: (e) => (e.phase === "model" ? bar : measureBar).update(e.done, e.total),
    },
  );
  bar.finish();
  measureBar.finish();
  if (cachePath !== undefined && !result.fromCache) {
    mkdirSync(dirname(cachePath), { recursive: true });
    writeFileSync(cachePath, serializeTuneCache(storeTune(cache, result.cacheKey, result.entry)));
  }
  const lines = [
    `${describeProblem(p)} on ${device}${result.fromCache ? " (from the cache)" : `: ${result.ranked.length} candidates priced, ${result.pruned.length} pruned`}`,
    `winner: ${result.winnerKey} — predicted ${result.predictedMs.toFixed(3)} ms${result.measuredMs !== undefined ? `, measured ${result.measuredMs.toFixed(3)} ms` : ""}`,
    result.message,
    ...figureLines(result),
  ];
  if (result.winner.path === "overlapped") lines.push(`emit it: ${emitFlags(p, result.winner)}`);
  if (result.ranked.length > 0) {
    lines.push("top candidates (model):");
    for (const r of result.ranked.slice(0, 5)) lines.push(`  ${r.predictedMs.toFixed(3)} ms  ${r.key}`);
  }
  for (const m of result.measured)
    lines.push(`  measured ${m.key}: ${m.measuredMs !== undefined ? `${m.measuredMs.toFixed(3)} ms` : m.error}`);
  if (cachePath !== undefined) lines.push(`cache: ${cachePath}`);
  const { ranked, pruned, measured, ...rest } = result;
  return {
    result,
    json: {
      ...rest,
      top: ranked.slice(0, 10),
      prunedCount: pruned.length,
      pruned: pruned.slice(0, 10),
      measured,
      cache: cachePath ?? null,
    },
    lines,
  };
}
