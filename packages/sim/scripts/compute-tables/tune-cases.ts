// The tune mode of emit-compute.ts: per shape (tune-shapes.ts), the candidates the runtime's
// on-device tuner times for the torch API's key there — listed by the built CLI (`ovl candidates`,
// the same command and flags the runtime runs: the table's pick first, then the winners of the
// table's nearest shapes and the compute model's picks) — each emitted as compute_bench.py launches
// a compiled operator's compute kernel: rank 0 of a split-1 plan, every wait already met. A
// GEMM+RS producer is timed twice from the same kernels: on the whole GPU, and on the SMs its push
// kernel leaves it (`reserve`: the grid is SMs − the push kernel's). compute_bench.py then picks per
// shape as the runtime does (the runtime's own rule) on half of the rounds and reports the pick, and
// the table's, on the other half.
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { TargetName } from "@ovl/primitives";
import { compile, tritonBackend } from "@ovl/tlx-emitter";
import type { ComputeConfig } from "../../src/index.js";
import { emittedCase, pinned, shapeOperator } from "./compute-cases.js";
import type { ComputeCase } from "./emit-compute.js";
import type { ComputeShape } from "./compute-shapes.js";
import type { TuneShape } from "./tune-shapes.js";

/** One shape of a tune file: its GEMM, the candidates to time there, the grid they get. */
export type TuneBenchShape = Omit<ComputeShape, "mlp"> & {
  readonly dtype: "bf16";
  readonly cases: readonly ComputeCase[];
  /** SMs left to another kernel (a GEMM+RS producer beside its push kernel): the persistent grid is min(SMs − reserve, tiles). */
  readonly reserve?: number;
  /** A suite shape (on the tables): a control. */
  readonly control: boolean;
  /** How the table's pick was decided (`ovl candidates`), for people. */
  readonly table: string;
};

/** The file compute_bench.py reads in a tune run. */
export interface TuneBenchFile {
  readonly schema: "ovl.compute-bench/v1";
  readonly mode: "tune";
  readonly target: TargetName;
  /** Candidates per shape asked of `ovl candidates` (the table's pick included). */
  readonly topK: number;
  readonly tables?: undefined;
  readonly shapes: readonly TuneBenchShape[];
}

/** The built CLI the runtime runs as `$OVL_CLI` (the monorepo's). */
export const CLI_BIN = fileURLToPath(new URL("../../../cli/dist/bin.js", import.meta.url));

/** What `ovl candidates --json` prints, as far as the bench reads it. */
export interface CandidatesJson {
  readonly $schema: "ovl.compute-candidates/v1";
  readonly gridSms: number;
  readonly commSms?: number;
  readonly table: string;
  readonly candidates: readonly {
    readonly source: string;
    readonly key: string;
    readonly config: ComputeConfig;
    readonly predictedMs: number;
  }[];
  readonly refused: readonly { readonly key: string; readonly reason: string }[];
}

/**
 * The `ovl candidates` arguments of the torch API's key at `s`, as the runtime's `_tune.candidates.cli_args` builds
 * them for `KernelKey(op, world, M, N, K)`: AllGather+GEMM by copy engine in 2 chunks per shard; GEMM+RS by SM
 * pushes, in 2 chunks unless a rank's slab is not whole 256-row blocks (`KernelKey.split`). Per-M keys: the
 * torch API's any-row-count AllGather+GEMM (M up to 32768) is tuned at the M it describes, not at each M.
 */
export function candidatesArgs(s: TuneShape, topK: number, target: TargetName): string[] {
  const split = s.op === "gemm-rs" && (s.M / s.world) % 256 !== 0 ? 1 : 2;
  return [
    "candidates",
    s.op,
    ...["--m", String(s.M), "--n", String(s.N), "--k", String(s.K), "--world", String(s.world)],
    ...["--split", String(split), "--backend", s.op === "gemm-rs" ? "sm" : "copy-engine", "--target", target],
    ...["--top-k", String(topK), "--json"],
  ];
}

/** `ovl candidates` at `s` through the built CLI. @throws {Error} when it fails. */
export function listCandidates(s: TuneShape, topK: number, target: TargetName, cli: string = CLI_BIN): CandidatesJson {
  const r = spawnSync(process.execPath, [cli, ...candidatesArgs(s, topK, target)], { encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${s.name}: ovl candidates exited ${String(r.status)}: ${r.stderr.slice(-2000)}`);
  return JSON.parse(r.stdout) as CandidatesJson;
}

/** The tune file: per shape its candidates emitted (role `table` for the table's pick, `candidate` for the others). */
export async function tuneCases(
  out: string,
  options: { readonly shapes: readonly TuneShape[]; readonly topK: number; readonly target: TargetName; readonly cli?: string },
): Promise<{ file: TuneBenchFile; bodies: Set<string> }> {
  mkdirSync(`${out}/emitted`, { recursive: true });
  const shapes: TuneBenchShape[] = [];
  for (const s of options.shapes) {
    const list = listCandidates(s, options.topK, options.target, options.cli);
    const op = shapeOperator(s);
    const cases: ComputeCase[] = [];
    for (const [i, c] of list.candidates.entries()) {
      const r = await compile(pinned(op, c.config, `${s.name}_c${i}`), tritonBackend, { target: options.target });
      cases.push({
        ...emittedCase(r, out, `emitted ${c.key}`, c.config, i === 0 ? "table" : "candidate", s),
        predictedMs: c.predictedMs,
        source: c.source,
      });
    }
    const { control, rowsPerRank: _rows, layer: _layer, ...gemm } = s;
    const shape: TuneBenchShape = { ...gemm, dtype: "bf16", cases, control, table: list.table };
    shapes.push(shape);
    if (s.op === "gemm-rs" && list.commSms !== undefined) shapes.push({ ...shape, name: `${s.name}_push`, reserve: list.commSms });
    const n = cases.length;
    console.log(`${s.name}: ${n} candidates (${list.refused.length} refused); table: ${list.table}`);
  }
  return { file: { schema: "ovl.compute-bench/v1", mode: "tune", target: options.target, topK: options.topK, shapes }, bodies: new Set() };
}
