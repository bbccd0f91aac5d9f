// `ovl emit moe-rs`: MoE's GroupGEMM + Scatter + TopK-reduce + ReduceScatter (TileLink's MoE
// part 2) with the routing computed on the device: ovl's built-in grouped GEMM + scatter body
// (or --kernel) writes each expert's weighted rows while every slab's owner pulls and sums
// them as soon as the slab is complete on every rank (a direct ReduceScatter of the slot rows).
import { planSignals, reduceScatterDirect, type ChunkPlan } from "@ovl/chunk-plan";
import type { RowsRequest } from "@ovl/tlx-emitter";
import { builtinBody, compile, MOE_RS_DEFAULT_BODY, MOE_RS_DEFAULT_TILE, type OperatorInput } from "@ovl/tlx-emitter";
import { UsageError } from "../errors.js";
import { DEFAULT_DTYPE, dtypeSuffix } from "../dtype.js";
import type { CommandOutput } from "../io.js";
import type { TargetName } from "@ovl/primitives";
import { parseMesh, resolveProblem } from "../problem.js";
import { anyRowsLine, moeSize, moeTile, parseChoices, type MoeFlags } from "./emit-moe.js";
import { anyRowsFlags, moeRowsRequest } from "./rows.js";
import { writeEmitted } from "./write-emitted.js";

/** The moe-rs problem of the flags: tokens (all ranks'), hidden, this rank's intermediate slice, routing. */
export interface MoeRsFlagsProblem {
  readonly tokens: number;
  readonly hidden: number;
  readonly intermediate: number;
  readonly experts: number;
  readonly topk: number;
  readonly choices?: readonly number[];
}

/**
 * The problem the flags name. `--m`/`--n`/`--k` are the producer GEMM's sizes: tokens, hidden
 * (its N) and this rank's intermediate slice (its K).
 * @throws {UsageError} a missing or contradictory size, top-k above the experts, bad --choices.
 */
export function moeRsOfFlags(f: MoeFlags): MoeRsFlagsProblem {
  const need = (a: number | undefined, b: number | undefined, flag: string) => moeSize("moe-rs", a, b, flag);
  const experts = need(f.experts, undefined, "--experts");
  const topk = need(f.topk, undefined, "--topk");
  if (topk > experts) throw new UsageError("bad-shape", `--topk ${topk} exceeds --experts ${experts}: a token picks distinct experts`);
  return {
    tokens: need(f.tokens, f.m, "--tokens (or --m)"),
    hidden: need(f.hidden, f.n, "--hidden (or --n)"),
    intermediate: need(f.intermediate, f.k, "--intermediate (or --k)"),
    experts,
    topk,
    ...(f.choices === undefined ? {} : { choices: parseChoices(f.choices, experts) }),
  };
}

/**
 * The signalled direct ReduceScatter of the slot rows `[T·k, H]` the flags name: `--split`
 * slabs per rank (default 2 when each rank's tokens are even, else 1).
 * @throws {UsageError} a template other than direct, a backend other than sm, tokens that do
 *   not divide over the world or into the split.
 */
export function moeRsPlan(f: MoeFlags, p: MoeRsFlagsProblem): ChunkPlan {
  if (f.template !== undefined && f.template !== "direct")
    throw new UsageError("unknown-template", `moe-rs reduces with the direct template (each owner pulls its slabs), not '${f.template}'`);
  if (f.backend !== undefined && f.backend !== "sm")
    throw new UsageError("unsupported", "moe-rs moves its slabs with SM pulls only (--backend sm); drop --backend");
  if (f.side !== undefined) throw new UsageError("unsupported", "moe-rs's owners pull their slabs; drop --side");
  const mesh = parseMesh(f);
  const world = mesh.reduce((a, b) => a * b, 1);
  if (p.tokens % world !== 0)
    throw new UsageError("bad-shape", `--tokens ${p.tokens} must divide evenly over the world (${world}): each rank owns T/W rows`);
  const perRank = p.tokens / world;
  const split = f.split ?? (perRank % 2 === 0 ? 2 : 1);
  if (perRank % split !== 0)
    throw new UsageError("bad-shape", `--split ${split} must divide each rank's ${perRank} tokens (a slab is whole tokens)`);
  const tensor = { name: "moe_slots", shape: [p.tokens * p.topk, p.hidden], dtype: f.dtype ?? DEFAULT_DTYPE };
  return planSignals(reduceScatterDirect({ tensor, src: "moe_slots_partial", axis: 0, mesh, split, afterCompute: true }));
}

/** Compile the flags' moe-rs operator into `outDir`. */
export async function emitMoeRsCommand(
  f: MoeFlags,
  outDir: string,
  kernelFile?: { path: string; source: string },
  target?: TargetName,
): Promise<CommandOutput> {
  const p = moeRsOfFlags(f);
  const plan = moeRsPlan(f, p);
  const rows = moeRsRows(f, p, target);
  const tile = moeTile(f.tile, MOE_RS_DEFAULT_TILE);
  const world = parseMesh(f).reduce((x, y) => x * y, 1);
  const dtype = f.dtype ?? DEFAULT_DTYPE;
  const name = `moe_rs_t${p.tokens}_h${p.hidden}_i${p.intermediate}_e${p.experts}_top${p.topk}${dtypeSuffix(dtype, "_")}_w${world}`;
  const op: OperatorInput = {
    name,
    kind: "moe-rs",
    plan,
    body: kernelFile ?? builtinBody(MOE_RS_DEFAULT_BODY),
    problem: { M: p.tokens, N: p.hidden, K: p.intermediate },
    moe: { experts: p.experts, topk: p.topk, ...(p.choices === undefined ? {} : { choices: p.choices }) },
    tile,
    options: { dtype },
    ...(rows === undefined ? {} : { rows }),
  };
  const result = await compile(op);
  const { dir, manifest, files } = writeEmitted(outDir, result, plan);
  const kernels = result.manifest.kernels.map((k) => ({ name: k.name, entry: k.entry, stream: k.stream, template: k.template.kind }));
  const slabs = result.manifest.signals.slots - 1;
  return {
    json: {
      name,
      dir,
      manifest,
      files,
      world,
      dtype,
      kernels,
      moe: { ...p, tile, slabs },
      ...(result.manifest.rows === undefined ? {} : { rows: result.manifest.rows }),
    },
    lines: [
      `${name}: ${p.tokens} tokens (hidden ${p.hidden}) reduce-scattered over ${world} ranks in ${slabs} slabs, top-${p.topk} of ${p.experts} experts, intermediate ${p.intermediate} per rank${dtypeSuffix(dtype, ", ")}`,
      `  tile ${tile.BM}x${tile.BN}x${tile.BK}, body ${op.body.path}; routing tables and slab targets computed on the device`,
      ...(result.manifest.rows === undefined ? [] : [anyRowsLine(result.manifest.rows)]),
      ...kernels.map((k) => `  kernel ${k.name} (${k.template}) on the ${k.stream} stream`),
      ...files.map((x) => `wrote ${x}`),
      `run it: ovl run ${manifest} --emulate    (or on GPUs: ovl run ${manifest} --gpus ${world})`,
    ],
  };
}

/**
 * `--any-rows`'s request for the moe-rs of the flags, or undefined without it: token counts in multiples of the slabs
 * (world · the plan's slabs per rank), one token a slab at least, and the simulator's crossover on `target` (moe-rs
 * takes no --target: the compiler's default target), the MoE priced as the GEMM+ReduceScatter of the same tokens and
 * work (its GEMM of depth I·topk, what the grouped GEMM computes per token).
 * @throws {UsageError} `--min-rows`/`--max-rows` without `--any-rows`, bounds that are not multiples of the slabs.
 */
function moeRsRows(f: MoeFlags, p: MoeRsFlagsProblem, target: TargetName | undefined): RowsRequest | undefined {
  const range = anyRowsFlags(f);
  if (range === undefined) return undefined;
  const world = parseMesh(f).reduce((x, y) => x * y, 1);
  const split = f.split ?? ((p.tokens / world) % 2 === 0 ? 2 : 1); // as moeRsPlan
  const slabs = world * split;
  for (const [flag, v] of [
    ["--min-rows", range.minRows],
    ["--max-rows", range.maxRows],
  ] as const)
    if (v !== undefined && v % slabs)
      throw new UsageError("usage", `${flag} ${v} must be a multiple of the ${slabs} slabs (--world ${world} · --split ${split})`);
  const gemm = resolveProblem("gemm-rs", {
    m: p.tokens,
    n: p.hidden,
    k: p.intermediate * p.topk,
    ...(f.world === undefined ? {} : { world: f.world }),
    ...(f.mesh === undefined ? {} : { mesh: f.mesh }),
    split,
  });
  return moeRowsRequest(gemm, range, target, {
    least: slabs,
    multiple: gemm.world * gemm.tile.BM,
    plain: "the grouped GEMM then the reduce-scatter",
  });
}
