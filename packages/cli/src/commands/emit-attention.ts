// `ovl emit ag-attention`: sequence-parallel attention with its KV gathered by an AllGather
// template (swizzle, ring — Mercury's ring-attention shift — or hierarchical) while ovl's
// built-in flash-attention body (or --kernel) computes; kernels, manifest and plan written.
import type { ChunkPlan } from "@ovl/chunk-plan";
import { attentionGemmView, builtinBody, compile, type AttentionProblem, type OperatorDtype, type OperatorInput } from "@ovl/tlx-emitter";
import { DEFAULT_DTYPE, dtypeSuffix } from "../dtype.js";
import { UsageError } from "../errors.js";
import type { CommandOutput } from "../io.js";
import { parseMesh } from "../problem.js";
import { rowsLines } from "./emit.js";
import { gatherPlan } from "./gather-plan.js";
import { anyRowsFlags } from "./rows.js";
import { attentionRowsRequest } from "./rows-attention.js";
import { writeEmitted } from "./write-emitted.js";

/** The flags `ovl emit ag-attention` reads. */
export interface AttentionFlags {
  seq?: number;
  heads?: number;
  kvHeads?: number;
  headDim?: number;
  causal?: boolean;
  /** `--dtype` (checked by its parser; default bf16). */
  dtype?: OperatorDtype;
  world?: number;
  mesh?: string;
  template?: string;
  side?: string;
  split?: number;
  tile?: string;
  backend?: string;
  /** `--any-rows` and its range: one operator for every sequence length (`rows-attention.ts`). */
  anyRows?: boolean;
  minRows?: number;
  maxRows?: number;
}

/** The attention problem the flags name (every size required but the kv heads, which default to the heads). */
export function attentionOfFlags(f: AttentionFlags): AttentionProblem {
  const need = (v: number | undefined, flag: string): number => {
    if (v === undefined)
      throw new UsageError("bad-shape", `ovl emit ag-attention needs ${flag}; e.g. --seq 4096 --heads 32 --head-dim 128`);
    return v;
  };
  const heads = need(f.heads, "--heads");
  return { S: need(f.seq, "--seq"), heads, kvHeads: f.kvHeads ?? heads, headDim: need(f.headDim, "--head-dim"), causal: f.causal === true };
}

/** The kv AllGather of the flags (`gatherPlan`). */
export function attentionPlan(f: AttentionFlags, a: AttentionProblem): ChunkPlan {
  return gatherPlan(f, { name: "kv", shape: [a.S, attentionGemmView(a).K], dtype: f.dtype ?? DEFAULT_DTYPE }, "ag-attention", "kv");
}

/** `--tile QxKV` (query rows × kv rows; a third number, if given, must be the head dimension). */
export function attentionTile(tile: string | undefined, headDim: number): OperatorInput["tile"] {
  if (tile === undefined) return undefined;
  const m = /^(\d+)x(\d+)(?:x(\d+))?$/.exec(tile);
  if (m === null) throw new UsageError("usage", `--tile '${tile}' is not QxKV (query rows x kv rows, e.g. 128x64)`);
  const BK = m[3] === undefined ? headDim : Number(m[3]);
  return { BM: Number(m[1]), BN: Number(m[2]), BK };
}

/** Compile the flags' attention operator into `outDir`. */
export async function emitAttentionCommand(
  f: AttentionFlags,
  outDir: string,
  kernelFile?: { path: string; source: string },
): Promise<CommandOutput> {
  const a = attentionOfFlags(f);
  const plan = attentionPlan(f, a);
  const tile = attentionTile(f.tile, a.headDim);
  const world = parseMesh(f).reduce((x, y) => x * y, 1);
  const range = anyRowsFlags(f);
  const rows =
    range === undefined
      ? undefined
      : attentionRowsRequest(
          { attention: a, world, split: f.split ?? 2, kvBlock: tile?.BN, template: f.template, side: f.side, backend: f.backend },
          range,
        );
  const dtype = f.dtype ?? DEFAULT_DTYPE;
  const name = `ag_attention_s${a.S}_h${a.heads}_kv${a.kvHeads}_d${a.headDim}${a.causal ? "_causal" : ""}${dtypeSuffix(dtype, "_")}_w${world}`;
  const op: OperatorInput = {
    name,
    kind: "ag-attention",
    plan,
    body: kernelFile ?? builtinBody("flash_attention"),
    problem: attentionGemmView(a),
    attention: a,
    ...(tile === undefined ? {} : { tile }),
    ...(rows === undefined ? {} : { rows }),
    options: { dtype },
  };
  const result = await compile(op);
  const { dir, manifest, files } = writeEmitted(outDir, result, plan);
  const k = result.manifest.kernels[0];
  const blocks = `${String(k?.constexprs.BLOCK_M)}x${String(k?.constexprs.BLOCK_N)}`;
  return {
    json: { name, dir, manifest, files, world, dtype, attention: result.manifest.reference.attention, blocks },
    lines: [
      `${name}: attention over S=${a.S} (${a.heads} heads, ${a.kvHeads} kv heads, head dim ${a.headDim}${a.causal ? ", causal" : ""}${dtypeSuffix(dtype, ", ")}), kv gathered by ${f.template ?? "swizzle"} on ${world} ranks`,
      `  blocks ${blocks} (query rows x kv rows), body ${op.body.path}`,
      ...rowsLines(result.manifest.rows),
      ...files.map((x) => `wrote ${x}`),
      `run it: ovl run ${manifest} --emulate --engine interpret    (or on GPUs: ovl run ${manifest} --gpus ${world})`,
    ],
  };
}
