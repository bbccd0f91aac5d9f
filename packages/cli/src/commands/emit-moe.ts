// `ovl emit ag-moe`: MoE's AllGather + Gather + grouped GEMM (TileLink's MoE part 1) with the
// routing computed on the device: the tokens gathered by an AllGather template while ovl's
// built-in gather + grouped GEMM body (or --kernel) computes each expert's rows.
import type { ChunkPlan } from "@ovl/chunk-plan";
import type { TargetName } from "@ovl/primitives";
import {
  builtinBody,
  compileOperator,
  MOE_DEFAULT_TILE,
  tritonBackend,
  type MoeRouting,
  type OperatorDtype,
  type OperatorInput,
  type Rows,
  type RowsRequest,
} from "@ovl/tlx-emitter";
import { DEFAULT_DTYPE, dtypeSuffix } from "../dtype.js";
import { UsageError } from "../errors.js";
import type { CommandOutput } from "../io.js";
import { describeCompute } from "./emit.js";
import { parseMesh, resolveProblem } from "../problem.js";
import { anyRowsFlags, moeRowsRequest } from "./rows.js";
import { gatherPlan } from "./gather-plan.js";
import { writeEmitted } from "./write-emitted.js";

/** The flags `ovl emit ag-moe` reads (`--m`/`--n`/`--k` name the same sizes as the GEMM flags). */
export interface MoeFlags {
  tokens?: number;
  hidden?: number;
  intermediate?: number;
  experts?: number;
  topk?: number;
  choices?: string;
  m?: number;
  n?: number;
  k?: number;
  /** `--dtype` (checked by its parser; default bf16). */
  dtype?: OperatorDtype;
  world?: number;
  mesh?: string;
  template?: string;
  side?: string;
  split?: number;
  tile?: string;
  backend?: string;
  /** `--any-rows` and its range: one operator for every token count (`moeRowsRequest`). */
  anyRows?: boolean;
  minRows?: number;
  maxRows?: number;
}

/** The MoE problem of the flags: tokens (all ranks'), hidden, this rank's intermediate, experts, top-k. */
export interface MoeProblem {
  readonly tokens: number;
  readonly hidden: number;
  readonly intermediate: number;
  readonly routing: MoeRouting;
}

/**
 * A size a MoE command (`ovl emit <command>`) requires, given by its flag (`a`) or its GEMM
 * alias (`b`). @throws {UsageError} `bad-shape` when both are given and differ, or neither is.
 */
export function moeSize(command: string, a: number | undefined, b: number | undefined, flag: string): number {
  if (a !== undefined && b !== undefined && a !== b)
    throw new UsageError("bad-shape", `${flag} and its GEMM alias name different sizes (${a}, ${b})`);
  const v = a ?? b;
  if (v === undefined) {
    throw new UsageError(
      "bad-shape",
      `ovl emit ${command} needs ${flag}; e.g. --tokens 8192 --hidden 2048 --intermediate 192 --experts 8 --topk 2 --world 8`,
    );
  }
  return v;
}

/** The problem the flags name; every size is required (`--tokens` or `--m`, ...). */
export function moeOfFlags(f: MoeFlags): MoeProblem {
  const need = (a: number | undefined, b: number | undefined, flag: string) => moeSize("ag-moe", a, b, flag);
  const experts = need(f.experts, undefined, "--experts");
  const topk = need(f.topk, undefined, "--topk");
  if (topk > experts) throw new UsageError("bad-shape", `--topk ${topk} exceeds --experts ${experts}: a token picks distinct experts`);
  const choices = f.choices === undefined ? undefined : parseChoices(f.choices, experts);
  return {
    tokens: need(f.tokens, f.m, "--tokens (or --m)"),
    hidden: need(f.hidden, f.k, "--hidden (or --k)"),
    intermediate: need(f.intermediate, f.n, "--intermediate (or --n)"),
    routing: choices === undefined ? { experts, topk } : { experts, topk, choices },
  };
}

/** The experts of `--choices 0,2,3`, each checked to lie in `[0, experts)`. */
export function parseChoices(text: string, experts: number): number[] {
  const out = text.split(",").map((s) => s.trim());
  const ids = out.map(Number);
  const bad = out.find((s, i) => !/^\d+$/.test(s) || (ids[i] as number) >= experts);
  if (bad !== undefined) throw new UsageError("usage", `--choices '${text}': '${bad}' is not an expert of [0, ${experts})`);
  return ids;
}

/** The token AllGather of the flags (`gatherPlan`). */
export function moePlan(f: MoeFlags, p: MoeProblem): ChunkPlan {
  return gatherPlan(f, { name: "X", shape: [p.tokens, p.hidden], dtype: f.dtype ?? DEFAULT_DTYPE }, "ag-moe", "tokens");
}

/** The `--tile BMxBNxBK` of a MoE command (`fallback` without one). */
export function moeTile(
  tile: string | undefined,
  fallback: { BM: number; BN: number; BK: number } = MOE_DEFAULT_TILE,
): { BM: number; BN: number; BK: number } {
  if (tile === undefined) return { ...fallback };
  const m = /^(\d+)x(\d+)x(\d+)$/.exec(tile);
  if (m === null) throw new UsageError("usage", `--tile '${tile}' is not BMxBNxBK (e.g. 64x128x64)`);
  return { BM: Number(m[1]), BN: Number(m[2]), BK: Number(m[3]) };
}

/**
 * Compile the flags' MoE operator into `outDir`. Without `--tile` the tuned table of `target`
 * (default: the compiler's default target) decides the body variant, tile, L2 grouping, warps
 * and stages for the shape and routing (`resolveCompute`); `--tile` keeps the built-in body at
 * that tile (or `--kernel`'s body) with the tile's default launch.
 */
export async function emitMoeCommand(
  f: MoeFlags,
  outDir: string,
  kernelFile?: { path: string; source: string },
  target?: TargetName,
): Promise<CommandOutput> {
  const p = moeOfFlags(f);
  const plan = moePlan(f, p);
  const world = parseMesh(f).reduce((x, y) => x * y, 1);
  const { experts, topk } = p.routing;
  const dtype = f.dtype ?? DEFAULT_DTYPE;
  const rows = moeRows(f, p, target);
  const name = `ag_moe_t${p.tokens}_h${p.hidden}_i${p.intermediate}_e${experts}_top${topk}${dtypeSuffix(dtype, "_")}_w${world}`;
  const input: OperatorInput = {
    name,
    kind: "ag-moe",
    plan,
    body: kernelFile ?? builtinBody("moe_gather_gemm_blocks"),
    problem: { M: p.tokens, N: p.intermediate, K: p.hidden },
    moe: p.routing,
    ...(f.tile === undefined ? {} : { tile: moeTile(f.tile) }),
    ...(rows === undefined ? {} : { rows }),
    options: { dtype },
  };
  // compile() resolves the compute configuration once (`--tile`, else the tuned table of the shape and routing).
  const { operator: op, compute: choice, result } = await compileOperator(input, tritonBackend, target === undefined ? {} : { target });
  const { dir, manifest, files } = writeEmitted(outDir, result, plan);
  const kernels = result.manifest.kernels.map((k) => ({ name: k.name, entry: k.entry, stream: k.stream, template: k.template.kind }));
  return {
    json: {
      name,
      dir,
      manifest,
      files,
      world,
      dtype,
      kernels,
      moe: { ...p, tile: op.tile, body: op.body.path },
      compute: choice,
      ...(result.manifest.rows === undefined ? {} : { rows: result.manifest.rows }),
    },
    lines: [
      `${name}: ${p.tokens} tokens (hidden ${p.hidden}) gathered by ${f.template ?? "swizzle"} on ${world} ranks, top-${topk} of ${experts} experts, intermediate ${p.intermediate} per rank${dtypeSuffix(dtype, ", ")}`,
      `  ${describeCompute(op, choice)}; routing tables computed on the device`,
      ...(result.manifest.rows === undefined ? [] : [anyRowsLine(result.manifest.rows)]),
      ...kernels.map((k) => `  kernel ${k.name} (${k.template}) on the ${k.stream} stream`),
      ...files.map((x) => `wrote ${x}`),
      `run it: ovl run ${manifest} --emulate    (or on GPUs: ovl run ${manifest} --gpus ${world})`,
    ],
  };
}

/**
 * `--any-rows`'s request for the MoE of the flags, or undefined without it: the range, and the simulator's crossover
 * (the MoE priced as the AllGather+GEMM of the same tokens and work, `moeRowsRequest`).
 * @throws {UsageError} `--min-rows`/`--max-rows` without `--any-rows`; `--any-rows` with another template than swizzle push.
 */
function moeRows(f: MoeFlags, p: MoeProblem, target: TargetName | undefined): RowsRequest | undefined {
  const range = anyRowsFlags(f);
  if (range === undefined) return undefined;
  if ((f.template ?? "swizzle") !== "swizzle" || (f.side ?? "push") !== "push")
    throw new UsageError(
      "unsupported",
      "ag-moe --any-rows gathers the tokens by the swizzle push AllGather; drop --template/--side or --any-rows",
    );
  const gemm = resolveProblem("ag-gemm", {
    m: p.tokens,
    n: p.intermediate * p.routing.topk,
    k: p.hidden,
    ...(f.world === undefined ? {} : { world: f.world }),
    ...(f.mesh === undefined ? {} : { mesh: f.mesh }),
    ...(f.split === undefined ? {} : { split: f.split }),
  });
  return moeRowsRequest(gemm, range, target);
}

/** The line that says which token counts the operator serves and where it does not overlap. */
export function anyRowsLine(r: Rows): string {
  const below =
    r.fallbackBelow === undefined
      ? ""
      : `; below ${r.fallbackBelow} tokens not overlapped (${r.fallbackReason ?? "the simulator's crossover"})`;
  return `  any token count ${r.range.min}..${r.range.max} (multiples of ${r.multiple}), described at ${r.at}${below}`;
}
