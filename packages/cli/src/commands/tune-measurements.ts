// `ovl tune --measurements FILE`: times a GPU run measured, fed to the tuner in place of
// running candidates here. The file names candidates by their keys (as `ovl tune --json`
// prints them) and the non-overlapped baseline as `sequential`; the tuner decides from these
// figures where it has them and says which figures are measured and which predicted.
import { existsSync, readFileSync } from "node:fs";
import { candidateKey, type RankedCandidate, type TuneFigure, type TuneResult } from "@ovl/sim";
import { UsageError } from "../errors.js";
import type { Problem } from "../problem.js";

/** Schema id of a measurements file. */
export const TUNE_MEASUREMENTS_SCHEMA = "ovl.tune-measurements/v1";

/** Measured times of candidates of one problem on one device. */
export interface TuneMeasurements {
  readonly $schema: typeof TUNE_MEASUREMENTS_SCHEMA;
  /** The GPU the times were taken on (becomes part of the cache key). */
  readonly device: string;
  /** The problem measured; when given, it must match the one tuned. */
  readonly problem?: { readonly operator: string; readonly M: number; readonly N: number; readonly K: number; readonly world: number };
  /** `candidate`: a candidate key, or `sequential` for the non-overlapped path; `ms`: its measured latency. */
  readonly measurements: readonly { readonly candidate: string; readonly ms: number }[];
}

function bad(path: string, why: string): UsageError {
  return new UsageError(
    "bad-file",
    `--measurements ${path}: ${why} (expected {"$schema": "${TUNE_MEASUREMENTS_SCHEMA}", "device": "...", "measurements": [{"candidate": "sequential", "ms": 0.7}, ...]})`,
  );
}

/** Read and check a measurements file. @throws {UsageError} `bad-file` naming what is wrong. */
export function readTuneMeasurements(path: string): TuneMeasurements {
  if (!existsSync(path)) throw bad(path, "no such file");
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw bad(path, `not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  const m = json as Partial<TuneMeasurements>;
  if (typeof m !== "object" || m === null || m.$schema !== TUNE_MEASUREMENTS_SCHEMA)
    throw bad(path, `$schema is not "${TUNE_MEASUREMENTS_SCHEMA}"`);
  if (typeof m.device !== "string" || m.device.length === 0) throw bad(path, "device must name the GPU the times were taken on");
  if (!Array.isArray(m.measurements)) throw bad(path, "measurements must be a list");
  m.measurements.forEach((x, i) => {
    if (typeof x?.candidate !== "string" || !(typeof x.ms === "number" && Number.isFinite(x.ms) && x.ms > 0))
      throw bad(path, `measurements[${i}] needs a candidate key and a positive ms`);
  });
  return m as TuneMeasurements;
}

/** Checks that `m` measured `p`. @throws {UsageError} `bad-file` when its problem differs. */
export function checkMeasuredProblem(m: TuneMeasurements, p: Problem, path: string): void {
  if (m.problem === undefined) return;
  const want = { operator: p.operator, M: p.M, N: p.N, K: p.K, world: p.world };
  const got = m.problem;
  if (got.operator !== want.operator || got.M !== want.M || got.N !== want.N || got.K !== want.K || got.world !== want.world) {
    throw bad(
      path,
      `it measured ${got.operator} M=${got.M} N=${got.N} K=${got.K} world=${got.world}, not ${want.operator} M=${want.M} N=${want.N} K=${want.K} world=${want.world}`,
    );
  }
}

/** A tuner `measure` answering from `m`: a candidate's measured time, or undefined when the file has none. */
export function measuredFrom(m: TuneMeasurements): (r: RankedCandidate) => number | undefined {
  const byKey = new Map(m.measurements.map((x) => [x.candidate, x.ms]));
  return (r) => byKey.get(candidateKey(r.candidate));
}

function figure(name: string, f: TuneFigure | undefined): string {
  if (f === undefined) return `${name}: no candidate`;
  return `${name}: ${f.ms.toFixed(3)} ms ${f.source}${f.key === "sequential" ? "" : ` (${f.key})`}`;
}

/** The lines that state both paths' figures and where each comes from. */
export function figureLines(result: TuneResult): string[] {
  if (result.fromCache) return [];
  return [figure("overlapped", result.figures.overlapped), figure("not overlapped (collective, then GEMM)", result.figures.sequential)];
}
