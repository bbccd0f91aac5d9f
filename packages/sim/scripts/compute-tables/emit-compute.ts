// Emits what packages/bench/gpu/compute_bench.py times on one GPU, as one `compute.json`
// plus the kernel files it names:
//   tsx scripts/compute-tables/emit-compute.ts sweep <out-dir> [--k 16] [--target h200]
//                                                          the model's best k configurations
//                                                          of every built-in body variant, per shape
//   tsx scripts/compute-tables/emit-compute.ts tune <out-dir> [--top-k 8] [--shapes shapes.json] [--target h200]
//                                                          per shape off the tables (tune-shapes.ts), the
//                                                          candidates `ovl candidates` lists for the torch
//                                                          API's key (the table's pick first), emitted
//   tsx scripts/compute-tables/emit-compute.ts bench <out-dir> [--sweep results.json --alternatives 3]
//                                [--model-k 12 --model-roles producer] [--target h200]
//                                [--bodies gemm_tma_persistent_streamk] [--ops ag-gemm]
//                                                          the compiled operators' compute kernels
//                                                          at their tuned configurations
// Shapes: the per-rank GEMMs of MLP-1…6 at worlds 2, 4, 8 (compute-shapes.ts). --target
// (default: compile()'s default target) names the GPU: the model of the sweep, and the table
// whose configurations bench's tuned cases take, as compile(op, backend, { target }) would;
// compute.json records it, and compute_bench.py copies it into its results.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_TARGET, TARGETS, type TargetName } from "@ovl/primitives";
import {
  COMPUTE_BODIES,
  computeKey,
  computeMeasurementSet,
  computeModel,
  rankComputeConfigs,
  type ComputeConfig,
} from "../../src/index.js";
import {
  builtinBodyPath,
  STREAM_K_BUFFERS,
  STREAM_K_PARAMS,
  STREAM_K_SLOTS,
  streamKScratch,
  type Buffer,
  type BuiltinBodyName,
  type WarpSpecialization,
} from "@ovl/tlx-emitter";
import { benchCases } from "./compute-cases.js";
import { computeShapes, type ComputeShape } from "./compute-shapes.js";
import { tuneCases, type TuneBenchFile } from "./tune-cases.js";
import { shapesFromJson, tuneShapes } from "./tune-shapes.js";

/** An argument of a timed kernel, as compute_bench.py binds it. */
export type CaseArg =
  | { readonly name: string; readonly kind: "a" | "b" | "c" | "error" }
  | { readonly name: string; readonly kind: "int" | "i64"; readonly value: number }
  | { readonly name: string; readonly kind: "table"; readonly values: readonly number[] }
  | { readonly name: string; readonly kind: "signals"; readonly size: number; readonly value: number }
  /** A scratch buffer zeroed once before the case's first launch (a stream-K body's partials and tile counts). */
  | { readonly name: string; readonly kind: "zeros"; readonly dtype: "fp32" | "int32"; readonly size: number };

/** One kernel launch to check and time at a shape. */
export interface ComputeCase {
  readonly label: string;
  /** `plain`: a body as written; `emitted`: the kernel compile() wrote (waits or notifies inserted). */
  readonly kind: "plain" | "emitted";
  readonly file: string;
  readonly entry: string;
  readonly config: ComputeConfig;
  readonly predictedMs?: number;
  /** Rank of the configuration in the model's ranking (0 = the model's best). */
  readonly modelRank?: number;
  readonly args: readonly CaseArg[];
  readonly constexprs: Readonly<Record<string, number>>;
  /** Tiles of the problem: the persistent grid is min(SMs, tiles). */
  readonly tiles: number;
  /**
   * In a bench run: the tuned kernel, its plain body, the previous default, another configuration, a plain TLX GEMM, or the TLX backend's kernel.
   * In a tune run: the table's pick (what the torch API binds without tuning) or another of the candidates an on-device tuner times.
   */
  readonly role?: "tuned" | "tuned-plain" | "previous" | "alternative" | "tlx" | "tlx-emitted" | "table" | "candidate";
  /** A tune run: where `ovl candidates` took the configuration from (table, default, nearest, model). */
  readonly source?: string;
  /** TLX cases: the consumer schedule and ring of the kernel. */
  readonly warpSpecialization?: WarpSpecialization;
  /** A precompiled kernel (TLX): its cubin and metadata, relative to the directory; `file` is its source. */
  readonly cubin?: string;
  readonly metadata?: string;
}

/** The file compute_bench.py reads. */
export interface ComputeBenchFile {
  readonly schema: "ovl.compute-bench/v1";
  readonly mode: "sweep" | "bench";
  /** The GPU the file is for: the sweep's model, the table of bench's tuned cases. */
  readonly target: TargetName;
  /** Bench: the tables the tuned cases came from (the target's own, or the one it borrows). */
  readonly tables?: readonly TargetName[];
  readonly shapes: readonly (ComputeShape & { readonly dtype: "bf16"; readonly cases: readonly ComputeCase[] })[];
}

/** Parameter `name` bound to `buffer` when it is zeroed fp32 / int32 scratch (compute_bench.py allocates it zeroed), else undefined. */
export function zerosArg(name: string, buffer: Buffer | undefined): CaseArg | undefined {
  if (buffer?.init !== "zeros" || (buffer.dtype !== "fp32" && buffer.dtype !== "int32")) return undefined;
  return { name, kind: "zeros", dtype: buffer.dtype, size: buffer.shape.reduce((x, y) => x * y, 1) };
}

/** The scratch arguments of a body with a stream-K tail at `c` (none for other bodies), in parameter order. */
function streamKArgs(c: ComputeConfig): { readonly pointers: CaseArg[]; readonly sizes: CaseArg[] } {
  if (COMPUTE_BODIES.find((b) => b.name === c.body)?.tail !== "stream-k") return { pointers: [], sizes: [] };
  const { buffers } = streamKScratch(Object.values(STREAM_K_PARAMS), c.BM, c.BN);
  const pointers = (["partials", "counts"] as const).map(
    (which) =>
      zerosArg(
        STREAM_K_PARAMS[which],
        buffers.find((b) => b.name === STREAM_K_BUFFERS[which]),
      )!,
  );
  return { pointers, sizes: [{ name: STREAM_K_PARAMS.slots, kind: "int", value: STREAM_K_SLOTS }] };
}

/** The arguments and constexprs of a plain built-in body at `c`. */
export function plainLaunch(s: { M: number; N: number; K: number }, c: ComputeConfig): Pick<ComputeCase, "args" | "constexprs" | "tiles"> {
  const scratch = streamKArgs(c);
  return {
    args: [
      { name: "a_ptr", kind: "a" },
      { name: "b_ptr", kind: "b" },
      { name: "c_ptr", kind: "c" },
      ...scratch.pointers,
      { name: "M", kind: "int", value: s.M },
      { name: "N", kind: "int", value: s.N },
      { name: "K", kind: "int", value: s.K },
      ...scratch.sizes,
    ],
    constexprs: { BLOCK_M: c.BM, BLOCK_N: c.BN, BLOCK_K: c.BK, GROUP_M: c.groupM },
    tiles: Math.ceil(s.M / c.BM) * Math.ceil(s.N / c.BN),
  };
}

function copyBodies(out: string, names: Iterable<string>): void {
  mkdirSync(join(out, "kernels"), { recursive: true });
  for (const n of names) copyFileSync(builtinBodyPath(n as BuiltinBodyName), join(out, "kernels", `${n}.py`));
}

/** The fixed configuration compile() used before tuned tables (128×256×64, GROUP_M 8, 3 stages, 8 warps). */
export function previousDefault(role: "consumer" | "producer"): ComputeConfig {
  return {
    body: role === "consumer" ? "gemm_tma_persistent" : "gemm_producer",
    BM: 128,
    BN: 256,
    BK: 64,
    groupM: 8,
    numStages: 3,
    numWarps: 8,
  };
}

/**
 * The sweep: per shape, the measurement set of the model's ranking over every body of its
 * role, plus the previous fixed default (for the report's before/after).
 */
export function sweepFile(k: number, target: TargetName = DEFAULT_TARGET.name): { file: ComputeBenchFile; bodies: Set<string> } {
  const bodies = new Set<string>();
  const model = computeModel(target);
  const shapes = computeShapes().map((s) => {
    const { ranked } = rankComputeConfigs({ role: s.role, M: s.M, N: s.N, K: s.K, dtype: "bf16" }, { model });
    const rank = new Map(ranked.map((r, i) => [r.key, i]));
    const set = computeMeasurementSet(ranked, k);
    const old = ranked.find((r) => r.key === computeKey(previousDefault(s.role)));
    if (old !== undefined && !set.some((r) => r.key === old.key)) set.push(old);
    const cases = set.map((r): ComputeCase => {
      bodies.add(r.config.body);
      return {
        label: r.key,
        kind: "plain",
        file: `kernels/${r.config.body}.py`,
        entry: r.config.body,
        config: r.config,
        predictedMs: r.predictedMs,
        modelRank: rank.get(r.key) ?? rank.get(r.key.replace(/ g\d+ /, " g8 ")) ?? -1,
        ...plainLaunch(s, r.config),
      };
    });
    return { ...s, dtype: "bf16" as const, cases };
  });
  return { file: { schema: "ovl.compute-bench/v1", mode: "sweep", target, shapes }, bodies };
}

/** The `--target` of argv (default: compile()'s default target). @throws {Error} for a name that is not a target. */
export function targetArg(argv: readonly string[]): TargetName {
  const i = argv.indexOf("--target");
  if (i < 0) return DEFAULT_TARGET.name;
  const name = argv[i + 1];
  if (name === undefined || !Object.hasOwn(TARGETS, name))
    throw new Error(`--target must be one of ${Object.keys(TARGETS).join(", ")}, got '${name ?? ""}'`);
  return name as TargetName;
}

async function main(): Promise<void> {
  const [mode, out] = [process.argv[2], process.argv[3]];
  if ((mode !== "sweep" && mode !== "bench" && mode !== "tune") || out === undefined) {
    console.error(
      "usage: tsx scripts/compute-tables/emit-compute.ts sweep <out-dir> [--k 24] [--target h200] | bench <out-dir> [--sweep results.json --alternatives 3] [--target h200] [--bodies <body,...>] [--ops ag-gemm,...] | tune <out-dir> [--top-k 8] [--shapes shapes.json] [--target h200] [--cli packages/cli/dist/bin.js]",
    );
    process.exit(2);
  }
  let target: TargetName;
  try {
    target = targetArg(process.argv);
  } catch (e) {
    console.error((e as Error).message);
    process.exit(2);
  }
  mkdirSync(out, { recursive: true });
  const ki = process.argv.indexOf("--k");
  const k = ki >= 0 ? Number(process.argv[ki + 1]) : 16;
  const si = process.argv.indexOf("--sweep");
  const ai = process.argv.indexOf("--alternatives");
  const mi = process.argv.indexOf("--model-k");
  const ri = process.argv.indexOf("--model-roles");
  const bi = process.argv.indexOf("--bodies");
  const oi = process.argv.indexOf("--ops");
  const ti = process.argv.indexOf("--top-k");
  const shi = process.argv.indexOf("--shapes");
  const ci = process.argv.indexOf("--cli");
  const { file, bodies }: { file: ComputeBenchFile | TuneBenchFile; bodies: Set<string> } =
    mode === "tune"
      ? await tuneCases(out, {
          target,
          topK: ti >= 0 ? Number(process.argv[ti + 1]) : 8,
          shapes: shi >= 0 ? shapesFromJson(JSON.parse(readFileSync(process.argv[shi + 1]!, "utf8"))) : tuneShapes(),
          ...(ci >= 0 ? { cli: process.argv[ci + 1]! } : {}),
        })
      : mode === "sweep"
        ? sweepFile(k, target)
        : await benchCases(out, {
            target,
            ...(si >= 0 ? { sweep: process.argv[si + 1]! } : {}),
            ...(ai >= 0 ? { alternatives: Number(process.argv[ai + 1]) } : {}),
            ...(mi >= 0 ? { modelK: Number(process.argv[mi + 1]) } : {}),
            ...(ri >= 0 ? { modelRoles: process.argv[ri + 1]!.split(",") } : {}),
            ...(bi >= 0 ? { bodies: process.argv[bi + 1]!.split(",") } : {}),
            ...(oi >= 0 ? { ops: process.argv[oi + 1]!.split(",") } : {}),
          });
  copyBodies(out, bodies);
  writeFileSync(join(out, "compute.json"), `${JSON.stringify(file, null, 1)}\n`);
  const n = file.shapes.reduce((a, s) => a + s.cases.length, 0);
  const configs = new Set(file.shapes.flatMap((s) => s.cases.map((c) => `${c.file} ${c.label}`)));
  const tables = file.tables === undefined ? "" : `, tuned cases from the ${file.tables.join(", ")} table`;
  console.log(
    `${out}/compute.json for ${file.target}: ${file.shapes.length} shapes, ${n} cases, ${configs.size} distinct kernels${tables}`,
  );
}

if (process.argv[1]?.endsWith("emit-compute.ts")) await main();
