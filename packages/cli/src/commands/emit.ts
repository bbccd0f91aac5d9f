// `ovl emit`: plan, lower and emit a fused operator (AG+GEMM, GEMM+RS or GEMM+AR) as Triton kernels
// plus the `ovl.manifest/v1` the runner executes, with the plan and schedule beside them.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { lowerToTileSchedule, planSignals, type ChunkPlan, type TileSchedule } from "@ovl/chunk-plan";
import {
  builtinBody,
  compileOperator,
  describeTable,
  emitManifestJson,
  fastestBackend,
  tlxBackend,
  tritonBackend,
  type ComputeChoice,
  type EmitResult,
  type KernelBody,
  type Operator,
  type OperatorInput,
  type Manifest,
  type RowsRequest,
  type BuiltinBodyName,
} from "@ovl/tlx-emitter";
import type { TargetName } from "@ovl/primitives";
import { buildPlan, consumes, gemmTiling } from "../build.js";
import { readPlanFile } from "./validate.js";
import { writeEmitted } from "./write-emitted.js";
import { decideCommSms } from "../comm-sms.js";
import { UsageError } from "../errors.js";
import type { CommandOutput } from "../io.js";
import { describeProblem, type Problem } from "../problem.js";
import { dtypeSuffix } from "../dtype.js";

/** What `emitProblem` wrote. */
export interface EmittedOperator {
  readonly name: string;
  readonly dir: string;
  readonly manifestPath: string;
  readonly files: readonly string[];
  readonly plan: ChunkPlan;
  readonly schedule: TileSchedule;
  readonly result: EmitResult;
  /** The operator as compiled (its tile, L2 grouping, warps, stages and body decided). */
  readonly operator: Operator;
  /** How its compute configuration was decided: the flags, the tuned table or the default. */
  readonly compute: ComputeChoice;
}

/** The manifest name of a problem, e.g. `ag_gemm_mlp1_w8_s2`. */
export function operatorName(p: Problem): string {
  const shape = p.shapeName !== undefined ? p.shapeName.replace("-", "").toLowerCase() : `m${p.M}n${p.N}k${p.K}`;
  const backend =
    p.operator === "gemm-ar" && p.template === "tilewise"
      ? "_tw"
      : p.backend === "nvshmem"
        ? "_nvshmem"
        : p.operator === "gemm-rs" || p.operator === "gemm-ar"
          ? p.backend === "sm"
            ? "_sm"
            : "_ce"
          : "";
  return `${p.operator.replace("-", "_")}_${shape}${dtypeSuffix(p.dtype, "_")}_w${p.world}${backend}_s${p.split}`;
}

/** Where the operator's communication plan and compute body come from (default: the template and ovl's built-in body). */
export interface EmitSources {
  /** A chunk plan file (ovl.chunk-plan/v1) in place of the template. */
  readonly planFile?: string;
  /** A local Triton kernel file (annotated with `# ovl:` comments) in place of the built-in body. */
  readonly kernelFile?: string;
  readonly timing?: { warmup: number; reps: number; checkRuns: number };
  /** The target whose tuned table decides the compute configuration without a tile (default: the default target). */
  readonly target?: TargetName;
  /** `--comm-sms`: programs of the SM push kernel (with `--backend sm`; default `decideCommSms`'s). */
  readonly commSms?: number;
  /** `--any-rows`: one operator for every row count of a range (`ANY_ROWS_OPERATORS`). */
  readonly rows?: RowsRequest;
  /** `--body`, `--num-warps`, `--num-stages`: compute knobs the flags name (`computePins`). */
  readonly body?: BuiltinBodyName;
  readonly numWarps?: number;
  readonly numStages?: number;
}

/** The compute knobs beside the tile that flags may name. */
export type ComputePins = Pick<EmitSources, "body" | "numWarps" | "numStages">;

/**
 * The Operator of `p`: its plan (template or file), its body (built-in or file), its backend
 * choices. The tile is left out when the flags named none (the tuned table decides it in
 * `compile()`), except for the tile-wise AllReduce, whose plan is cut on the tile.
 */
export function problemOperator(p: Problem, sources: EmitSources = {}): OperatorInput {
  const plan = sources.planFile === undefined ? buildPlan(p) : withSignals(readPlanFile(sources.planFile));
  const body =
    sources.kernelFile !== undefined
      ? readKernelFile(sources.kernelFile)
      : builtinBody(sources.body ?? (consumes(p) ? "gemm_tma_persistent" : "gemm_producer"));
  return {
    name: operatorName(p),
    kind: p.operator === "ag-gemm" || p.operator === "gemm-ar" || p.operator === "a2a-gemm" ? p.operator : "gemm-rs",
    plan,
    body,
    problem: { M: p.M, N: p.N, K: p.K },
    ...(sources.rows === undefined ? {} : { rows: sources.rows }),
    ...(p.named.tile || tilewise(p) ? { tile: { ...p.tile } } : {}),
    ...(p.named.tile || p.named.groupM ? { groupM: p.groupSizeM } : {}),
    // The tile-wise AllReduce moves strided tiles, which only SM pushes do.
    options: {
      dtype: p.dtype,
      backend: tilewise(p) ? "sm" : p.backend,
      ...(sources.commSms === undefined ? {} : { commSms: sources.commSms }),
      ...(sources.timing ? { timing: sources.timing } : {}),
      // Named warps and stages win over the tuned entry's (`resolveCompute` keeps what the operator names).
      ...(sources.numWarps === undefined ? {} : { numWarps: sources.numWarps }),
      ...(sources.numStages === undefined ? {} : { numStages: sources.numStages }),
    },
  };
}

function tilewise(p: Problem): boolean {
  return p.operator === "gemm-ar" && p.template === "tilewise";
}

function withSignals(plan: ChunkPlan): ChunkPlan {
  return plan.signals === undefined ? planSignals(plan) : plan;
}

export function readKernelFile(path: string): KernelBody {
  if (!existsSync(path)) throw new UsageError("bad-file", `--kernel ${path}: no such file`);
  return { path: basename(path), source: readFileSync(path, "utf8") };
}

/**
 * Compile `p` into `outDir` (kernels, manifest.json, plan.json, schedule.json): the plan
 * validated, lowered against the body's tiling, the body transformed (`compile`).
 */
export async function emitProblem(p: Problem, outDir: string, sources: EmitSources = {}): Promise<EmittedOperator> {
  if (p.operator !== "ag-gemm" && p.operator !== "gemm-rs" && p.operator !== "gemm-ar" && p.operator !== "a2a-gemm") {
    throw new UsageError(
      "unsupported",
      `ovl emit writes fused kernels for ag-gemm, gemm-rs, gemm-ar or a2a-gemm, not ${p.operator}; try: ovl emit ag-gemm --shape MLP-1 --world 4`,
    );
  }
  if (consumes(p) && p.backend === "sm") {
    throw new UsageError(
      "unsupported",
      `${p.operator === "ag-gemm" ? "AG+GEMM" : "A2A+GEMM"} is emitted with copy-engine transfers only; drop --backend sm (GEMM+RS takes --backend sm)`,
    );
  }
  if (p.backend === "nvshmem" && p.operator !== "ag-gemm" && p.operator !== "gemm-rs" && p.operator !== "gemm-ar") {
    throw new UsageError(
      "unsupported",
      `--backend nvshmem realises ag-gemm's chunk pushes, gemm-rs's slab pushes and the partitioned gemm-ar's; ${p.operator} takes --backend copy-engine`,
    );
  }
  if (p.backend === "nvshmem" && tilewise(p)) {
    throw new UsageError(
      "unsupported",
      "--backend nvshmem realises the partitioned gemm-ar (--template direct); the tile-wise AllReduce pushes strided tiles with SM stores: drop --backend nvshmem, or use --template direct",
    );
  }
  if (p.backend === "nvshmem" && sources.rows !== undefined) {
    throw new UsageError(
      "unsupported",
      "--any-rows moves chunks with host copies instantiated per M; drop --backend nvshmem or --any-rows",
    );
  }
  if (sources.planFile === undefined && p.template === "direct" && p.operator === "ag-gemm") {
    throw new UsageError("unsupported", "the direct template is one NCCL collective, with nothing to fuse; use --template swizzle or ring");
  }
  const input = problemOperator(p, sources);
  // compile() resolves the compute configuration (tuned table or default) once; the schedule
  // written beside the kernels is lowered at the tile it chose.
  const compiled = await compileOperator(input, tritonBackend, sources.target === undefined ? {} : { target: sources.target });
  const { operator: op, compute: choice, result } = compiled;
  const schedule = lowerToTileSchedule(
    input.plan,
    { ...gemmTiling({ ...p, tile: op.tile, groupSizeM: op.groupM ?? p.groupSizeM }), tensor: scheduleTensor(p, input.plan) },
    { role: consumes(p) ? "consumer" : "producer" },
  );
  const { dir, manifest: manifestPath, files } = writeEmitted(outDir, result, input.plan);
  writeFileSync(join(dir, "schedule.json"), `${JSON.stringify(schedule)}\n`);
  files.push(join(dir, "schedule.json"));
  return { name: op.name, dir, manifestPath, files, plan: input.plan, schedule, result, operator: op, compute: choice };
}

/** The tensor the schedule tiles: the template's, or the one a plan file moves / waits on. */
function scheduleTensor(p: Problem, plan: ChunkPlan): string {
  const fallback = gemmTiling(p).tensor;
  if (plan.tensors.some((t) => t.name === fallback)) return fallback;
  const first = plan.ranks.flatMap((r) => r.streams.flat())[0];
  if (first === undefined) throw new UsageError("invalid-plan", `plan "${plan.name}" moves nothing`);
  const dep = first.deps.find((d) => d.kind === "compute");
  return dep !== undefined && dep.kind === "compute" ? dep.region.tensor : first.dst.tensor;
}

/** What `emitTlx` wrote: files, and how its configuration was decided. */
export interface EmittedTlx {
  readonly files: string[];
  readonly dir: string;
  readonly operator: Operator;
  readonly compute: ComputeChoice;
  /** Which backend `fastestBackend()` takes for this operator (the tuned table's measurement decides): `tlx` or `triton`. */
  readonly fastest: string;
}

/**
 * Also compile the operator with the TLX backend (warp-specialised, sm_90a) into `<dir>/tlx`:
 * kernels, manifest (its compute kernel marked precompiled) and `expect.json`, the PTX the
 * AOT compile checks (`@ovl/tlx-emitter`'s scripts/tlx-aot-compile.py builds the cubin where
 * the TLX compiler is installed). Without a tile, the tuned table's TLX entry decides the
 * tile, grouping, consumer schedule and ring.
 */
export async function emitTlx(p: Problem, e: EmittedOperator, sources: EmitSources = {}): Promise<EmittedTlx> {
  const input = { ...problemOperator(p, sources), name: `${e.name}_tlx` };
  // compile() resolves the TLX configuration (the tuned entry's `tlx` one) once.
  const {
    operator: op,
    compute: choice,
    result: tlx,
  } = await compileOperator(input, tlxBackend(), sources.target === undefined ? {} : { target: sources.target });
  // What `--backend fastest` (fastestBackend) would compile here: the TLX kernels only where the table measured them faster.
  const fastest = (await compileOperator(input, fastestBackend(), sources.target === undefined ? {} : { target: sources.target })).backend
    .name;
  const dir = join(e.dir, "tlx");
  mkdirSync(dir, { recursive: true });
  const files = tlx.files.map((f) => {
    writeFileSync(join(dir, f.path), f.text);
    return join(dir, f.path);
  });
  writeFileSync(join(dir, "manifest.json"), emitManifestJson(tlx.manifest));
  writeFileSync(join(dir, "expect.json"), `${JSON.stringify(tlx.expect ?? {}, null, 2)}\n`);
  return { files: [...files, join(dir, "manifest.json"), join(dir, "expect.json")], dir, operator: op, compute: choice, fastest };
}

/** One line on the TLX kernel's configuration and, from the tuned table, how it measured against the Triton kernel. */
export function describeTlx(t: EmittedTlx): string {
  const ws = t.operator.warpSpecialization;
  const knobs = `tile ${t.operator.tile.BM}x${t.operator.tile.BN}x${t.operator.tile.BK}, group ${t.operator.groupM ?? 8}, ${ws?.consumerSchedule ?? "cooperative"} consumers, ${ws?.stages ?? 3} stages${(ws?.clusterM ?? 1) > 1 ? `, ${ws?.clusterM}x1 clusters sharing B by multicast` : ""}`;
  if (t.compute.source !== "table")
    return `${knobs} (${t.compute.source === "explicit" ? "named by --tile" : `default: ${t.compute.reason}`})`;
  const e = t.compute.entry;
  const measured =
    e.tlx?.ms !== undefined && e.ms !== undefined
      ? `; measured in one run: TLX ${e.tlx.ms} ms, Triton ${e.ms} ms${e.cublasMs === undefined ? "" : `, cuBLAS ${e.cublasMs} ms`}`
      : "";
  return `${knobs} (tuned ${describeTable(t.compute)}, ${t.compute.match === "exact" ? "exact shape" : "nearest shape"}${measured})`;
}

/** Run `ovl emit`; with `tlx`, also the TLX backend's kernels (AG+GEMM and GEMM+RS). */
export async function emitCommand(p: Problem, outDir: string, tlx = false, sources: EmitSources = {}): Promise<CommandOutput> {
  if (tlx && p.operator !== "ag-gemm" && p.operator !== "gemm-rs")
    throw new UsageError("unsupported", `--tlx emits the warp-specialised AG+GEMM and GEMM+RS; drop --tlx for ${p.operator}`);
  if (tlx && sources.kernelFile !== undefined)
    throw new UsageError("unsupported", "--tlx assembles its own warp-specialised GEMM and cannot take --kernel");
  const comm = decideCommSms(p, sources.commSms, sources.target);
  const e = await emitProblem(p, outDir, { ...sources, ...(comm === undefined ? {} : { commSms: comm.commSms }) });
  const t = tlx ? await emitTlx(p, e, sources) : undefined;
  const tlxFiles = t?.files ?? [];
  const kernels = e.result.manifest.kernels.map((k) => ({ name: k.name, entry: k.entry, stream: k.stream, template: k.template.kind }));
  return {
    json: {
      name: e.name,
      dir: e.dir,
      manifest: e.manifestPath,
      files: [...e.files, ...tlxFiles],
      kernels,
      world: p.world,
      dtype: p.dtype,
      ...(comm === undefined ? {} : { commSms: comm.commSms }),
      compute: {
        ...e.operator.tile,
        groupM: e.operator.groupM,
        source: e.compute.source,
        ...(e.compute.source === "table" ? { table: e.compute.target, target: e.compute.requested } : {}),
      },
      ...(t === undefined
        ? {}
        : {
            tlx: {
              manifest: join(t.dir, "manifest.json"),
              fastest: t.fastest,
              ...t.operator.tile,
              groupM: t.operator.groupM,
              ...t.operator.warpSpecialization,
              source: t.compute.source,
              ...(t.compute.source === "table" && t.compute.entry.tlx?.ms !== undefined
                ? { measuredMs: { tlx: t.compute.entry.tlx.ms, triton: t.compute.entry.ms, cublas: t.compute.entry.cublasMs } }
                : {}),
            },
          }),
    },
    lines: [
      `${e.name}: ${describeProblem(p)}${sources.kernelFile === undefined ? "" : ` — body ${sources.kernelFile}`}${sources.planFile === undefined ? "" : ` — plan ${sources.planFile}`}`,
      `  compute: ${describeCompute(e.operator, e.compute)}`,
      ...(comm === undefined ? [] : [`  push kernel: ${comm.commSms} SMs (${comm.why})`]),
      ...rowsLines(e.result.manifest.rows),
      ...(t === undefined ? [] : [`  tlx: ${describeTlx(t)}; build the cubin with tlx-aot-compile.py ${join(t.dir, "manifest.json")}`]),
      ...kernels.map((k) => `  kernel ${k.name} (${k.template}) on the ${k.stream} stream`),
      ...[...e.files, ...tlxFiles].map((f) => `wrote ${f}`),
      `run it: ovl run ${e.manifestPath} --emulate    (or on GPUs: ovl run ${e.manifestPath} --gpus ${p.world})`,
    ],
  };
}

/** What an any-row-count operator serves, and where it does not overlap. */
export function rowsLines(rows: Manifest["rows"]): string[] {
  if (rows === undefined) return [];
  const serves = `  rows: every M from ${rows.range.min} to ${rows.range.max} in multiples of ${rows.multiple} (described at ${rows.at})`;
  if (rows.fallbackBelow === undefined) return [serves];
  return [serves, `  not overlapped below ${rows.fallbackBelow} rows: ${rows.fallbackReason ?? "the plain sequence is faster there"}`];
}

/** One line naming the compiled tile and where it came from, e.g. `tile 128x128x64, group 8 (tuned h100 table, exact shape)`. */
export function describeCompute(op: Operator, choice: ComputeChoice): string {
  const t = op.tile;
  const knobs = `tile ${t.BM}x${t.BN}x${t.BK}, group ${op.groupM ?? 8}${op.options?.numWarps === undefined ? "" : `, ${op.options.numWarps} warps`}${op.options?.numStages === undefined ? "" : `, ${op.options.numStages} stages`}, body ${op.body.path}`;
  const why =
    choice.source === "explicit"
      ? "named by --tile"
      : choice.source === "table"
        ? `tuned ${describeTable(choice)}, ${choice.match === "exact" ? "exact shape" : "nearest shape"}`
        : `default: ${choice.reason}`;
  return `${knobs} (${why})`;
}
