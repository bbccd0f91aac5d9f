// Sequence-parallel attention with its KV gathered (TileLink's AG+attention, Mercury's ring
// attention when the plan is a ring): rank r holds its S/W query rows and its S/W rows of
// `kv`; an AllGather plan gathers `kv` while a flash-attention body visits kv blocks in
// arrival order and waits on every chunk slot the blocks' rows meet, once per arrival group
// before an inner kv loop over the group's blocks (`compile/kv-groups.ts`).
//
// Layout (row-major, row = sequence position): Q `[S/W, H·D]` local, kv `[S, 2·Hkv·D]`
// gathered (K of kv head g at columns g·D, V at (Hkv + g)·D), O `[S/W, H·D]` local.
import { lowerToTileSchedule, type TileSchedule } from "@ovl/chunk-plan";
import type { EmitResult } from "../../core/result.js";
import { checkDistinctBuffers, checkPlanAndSchedule, signalBuffer, SIGNAL_BUFFER, worldOf } from "../../backends/triton/common.js";
import { planHostOps } from "../../schedule/host-ops.js";
import { resolveOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import { parseLocalKernel, transformLocalKernel, type LocalKernel } from "../../local/index.js";
import { MANIFEST_SCHEMA, type Buffer, type KernelArg, type Manifest } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import type { Binding } from "../../core/bind.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { kvGroupTables } from "./kv-groups.js";
import { consumerMaps, copyEngineColumns, consumerInsertedArgs, tablesOf } from "../../schedule/maps.js";
import type { AttentionProblem, GemmProblem, Operator } from "../../core/operator.js";

/** Manifest buffers of the local query rows and output rows. */
export const ATTN_Q = "attn_q";
export const ATTN_O = "attn_o";

/** The tile of an attention operator that names none: 128 query rows, 64 kv rows, BK = D. */
export const DEFAULT_ATTENTION_BLOCKS = { BM: 128, BN: 64 } as const;

/** An operator's GEMM view of an attention problem: M = S rows, N = H·D output columns, K = 2·Hkv·D kv columns. */
export function attentionGemmView(a: AttentionProblem): GemmProblem {
  return { M: a.S, N: a.heads * a.headDim, K: 2 * a.kvHeads * a.headDim };
}

/** The default tile of `a`: `DEFAULT_ATTENTION_BLOCKS`, BK the head dimension. */
export function defaultAttentionTile(a: AttentionProblem): { BM: number; BN: number; BK: number } {
  return { ...DEFAULT_ATTENTION_BLOCKS, BK: a.headDim };
}

const pow2 = (x: number, lo: number, hi: number): boolean => Number.isSafeInteger(x) && x >= lo && x <= hi && (x & (x - 1)) === 0;

/**
 * Checks an attention problem against the world and tile: S a multiple of the world (equal
 * sequence shards), H a multiple of Hkv, D and both blocks powers of two in [16, 256] (Triton's
 * `tl.dot` and `tl.arange`), BK = D, a positive finite scale. Pure; returns the problem with
 * its scale filled in.
 * @throws {EmitError} `bad-param` naming the first fault and what to change.
 */
export function checkAttention(
  a: AttentionProblem | undefined,
  world: number,
  tile: { readonly BM: number; readonly BN: number; readonly BK: number },
): Required<AttentionProblem> {
  if (a === undefined) throw new EmitError("bad-param", "an ag-attention operator needs attention: { S, heads, kvHeads, headDim, causal }");
  const bad = (what: string): EmitError => new EmitError("bad-param", `attention: ${what}`);
  for (const [k, v] of [
    ["S", a.S],
    ["heads", a.heads],
    ["kvHeads", a.kvHeads],
  ] as const) {
    if (!Number.isSafeInteger(v) || v < 1) throw bad(`${k} must be a positive integer, got ${v}`);
  }
  if (typeof a.causal !== "boolean") throw bad(`causal must be true or false, got ${String(a.causal)}`);
  if (a.heads % a.kvHeads !== 0)
    throw bad(`heads (${a.heads}) must be a multiple of kvHeads (${a.kvHeads}): each kv head serves heads / kvHeads query heads`);
  if (!pow2(a.headDim, 16, 256)) throw bad(`headDim must be a power of two in [16, 256], got ${a.headDim}`);
  if (a.S % world !== 0) {
    const padded = Math.ceil(a.S / world) * world;
    throw bad(`S (${a.S}) is not a multiple of the world (${world}): shard the sequence evenly, e.g. pad it to ${padded}`);
  }
  if (!pow2(tile.BM, 16, 256) || !pow2(tile.BN, 16, 256))
    throw bad(`the tile's BM (query rows, ${tile.BM}) and BN (kv rows, ${tile.BN}) must be powers of two in [16, 256]`);
  if (tile.BK !== a.headDim) throw bad(`the tile's BK (${tile.BK}) must be the head dimension (${a.headDim}): a block reads whole heads`);
  const scale = a.scale ?? 1 / Math.sqrt(a.headDim);
  if (!Number.isFinite(scale) || scale <= 0) throw bad(`scale must be a positive finite number, got ${scale}`);
  return { S: a.S, heads: a.heads, kvHeads: a.kvHeads, headDim: a.headDim, causal: a.causal, scale };
}

/** Warps and stages of an attention body by tile (Triton's flash-attention tutorial on Hopper). */
export function attentionLaunch(BM: number, headDim: number): { numWarps: number; numStages: number } {
  return { numWarps: BM >= 128 ? 8 : 4, numStages: headDim <= 64 ? 4 : 3 };
}

/** `op`'s plan lowered against kv blocks of `BN` rows: a consumer whose tiles are the kv blocks. */
export function attentionSchedule(op: Operator, tensor: string, S: number): TileSchedule {
  return lowerToTileSchedule(
    op.plan,
    { tensor, problem: { M: S, N: 1, K: 1 }, tile: { BM: op.tile.BN, BN: 1, BK: 1 }, persistent: null, groupSizeM: 1 },
    { role: "consumer" },
  );
}

const arg = (a: KernelArg): Binding => ({ kind: "arg", arg: a });
const constexpr = (value: number | boolean): Binding => ({ kind: "constexpr", value });

/**
 * `op`'s body, parsed: a consumer whose kv loop waits per kv block.
 * @throws {EmitError} `bad-param` for another body; {LocalKernelError} for one that does not parse.
 */
export async function attentionBody(op: Operator): Promise<LocalKernel> {
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "consumer" || kernel.waitsPer !== "kv-block") {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: AllGather+attention needs a consumer body whose kv loop marks its block with "# ovl: tile kv=<var>" (e.g. the built-in flash_attention); ${kernel.entry} waits per ${kernel.role === "consumer" ? "tile" : "nothing (it is a producer)"}`,
    );
  }
  return kernel;
}

/** The one tensor `op.plan` gathers (kv). @throws {EmitError} `bad-plan` for a plan that moves none or several. */
export function gatheredTensor(op: Operator): string {
  const moved = new Set(op.plan.ranks.flatMap((r) => r.streams.flatMap((s) => s.map((x) => x.dst.tensor))));
  const [tensorName, other] = [...moved];
  if (tensorName === undefined) throw new EmitError("bad-plan", `plan "${op.plan.name}" moves nothing`);
  if (other !== undefined)
    throw new EmitError("bad-plan", `plan "${op.plan.name}" writes tensors ${[...moved].join(", ")}; it gathers kv only`);
  return tensorName;
}

/** `op.problem`, checked to be attention `a`'s GEMM view. @throws {EmitError} `bad-param` otherwise. */
export function checkAttentionView(op: Operator, a: AttentionProblem): GemmProblem {
  const view = attentionGemmView(a);
  if (op.problem.M !== view.M || op.problem.N !== view.N || op.problem.K !== view.K) {
    throw new EmitError(
      "bad-param",
      `problem [M, N, K] = [${op.problem.M}, ${op.problem.N}, ${op.problem.K}] is not attention's view [S, H·D, 2·Hkv·D] = [${view.M}, ${view.N}, ${view.K}] (attentionGemmView)`,
    );
  }
  return view;
}

/** How the body's sequence lengths are bound: this rank's query rows `SQ` and every rank's kv rows `SKV`. */
export interface AttentionLengths {
  readonly SQ: KernelArg;
  readonly SKV: KernelArg;
}

/**
 * The bindings of `kernel`'s parameters (the built-in flash_attention's names, or `op.bind`'s) for attention `a`
 * over the gathered `kv`, its lengths bound as `lengths` says.
 * @throws {EmitError} `bad-param` for a `bind` naming no parameter, or a parameter left without a binding.
 */
export function attentionBindings(
  op: Operator,
  kernel: LocalKernel,
  a: Required<AttentionProblem>,
  kv: string,
  lengths: AttentionLengths,
): Map<string, Binding> {
  const byName: Record<string, Binding> = {
    q_ptr: arg({ kind: "buffer", name: ATTN_Q }),
    [kernel.operand]: arg({ kind: "buffer", name: kv }),
    o_ptr: arg({ kind: "buffer", name: ATTN_O }),
    SQ: arg(lengths.SQ),
    SKV: arg(lengths.SKV),
    q_shard: arg({ kind: "rank" }),
    sm_scale: constexpr(a.scale),
    H: constexpr(a.heads),
    HKV: constexpr(a.kvHeads),
    HEAD_DIM: constexpr(a.headDim),
    BLOCK_M: constexpr(op.tile.BM),
    BLOCK_N: constexpr(op.tile.BN),
    CAUSAL: constexpr(a.causal),
  };
  const names = kernel.params.map((p) => p.name);
  for (const p of Object.keys(op.bind ?? {})) {
    if (!names.includes(p))
      throw new EmitError("bad-param", `bind names "${p}", which is not a parameter of ${kernel.entry} (it has ${names.join(", ")})`);
  }
  const own = new Map<string, Binding>();
  const missing: string[] = [];
  for (const p of names) {
    const b = op.bind?.[p] ?? byName[p];
    if (b === undefined) missing.push(p);
    else own.set(p, b);
  }
  if (missing.length > 0) {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: ${kernel.entry}'s parameter${missing.length > 1 ? "s" : ""} ${missing.join(", ")} ha${missing.length > 1 ? "ve" : "s"} no binding: name them as the built-in flash_attention does (q_ptr, o_ptr, SQ, SKV, q_shard, sm_scale, H, HKV, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL) or pass bind: { ${missing[0]}: ... }`,
    );
  }
  return own;
}

/** The kernel's template params: the operator, body, buffers, sizes at `S` and blocks. */
export function attentionParams(op: Operator, kernel: LocalKernel, a: Required<AttentionProblem>, kv: string, slotColumns: number) {
  return {
    operator: "ag-attention",
    body: op.body.path,
    entry: kernel.entry,
    slotColumns,
    q: ATTN_Q,
    kv,
    o: ATTN_O,
    S: a.S,
    heads: a.heads,
    kvHeads: a.kvHeads,
    headDim: a.headDim,
    causal: a.causal,
    BLOCK_M: op.tile.BM,
    BLOCK_N: op.tile.BN,
  };
}

/** The manifest's reference of attention `a` over the gathered `kv` (rows per rank `S / world`). */
export function attentionReference(
  a: Required<AttentionProblem>,
  kv: string,
  world: number,
  tolerance: Manifest["reference"]["tolerance"],
): Manifest["reference"] {
  return {
    operator: "ag-attention",
    ...attentionGemmView(a),
    inputs: { Q: ATTN_Q, KV: kv },
    output: ATTN_O,
    rowsPerRank: a.S / world,
    attention: { heads: a.heads, kvHeads: a.kvHeads, headDim: a.headDim, causal: a.causal, scale: a.scale },
    tolerance,
  };
}

/**
 * Compile an AllGather+attention operator: `op.plan` gathers `kv`'s rows (any AllGather
 * template or hand-written plan the copy engine can realise; chunks need not fall on kv
 * blocks), the body (`# ovl: consumer gather=<kv>` with `# ovl: tile kv=<var>` in its kv
 * loop) computes attention over them in arrival order.
 * @throws {EmitError} `bad-param` for a bad attention problem, tile or body bindings,
 *   `bad-plan` for a plan that does not gather a `[S, 2·Hkv·D]` tensor; {LocalKernelError}
 *   for a body that cannot be transformed.
 */
export async function compileAgAttention(op: Operator): Promise<EmitResult> {
  const o = resolveOptions(op.options ?? {});
  const kernel = await attentionBody(op);
  const tensorName = gatheredTensor(op);
  const a = checkAttention(op.attention, worldOf(op.plan), op.tile);
  const sched = attentionSchedule(op, tensorName, a.S);
  const { signals, world, tensor } = checkPlanAndSchedule(op.plan, sched, "consumer");
  const view = checkAttentionView(op, a);
  if (tensor.shape[0] !== a.S || tensor.shape[1] !== view.K) {
    throw new EmitError(
      "bad-plan",
      `tensor ${tensor.name} is [${tensor.shape.join(", ")}]; attention gathers kv as [S, 2·Hkv·D] = [${a.S}, ${view.K}]`,
    );
  }
  if (tensor.dtype !== o.dtype) throw new EmitError("bad-plan", `tensor ${tensor.name} is ${tensor.dtype} but options.dtype is ${o.dtype}`);
  const SQ = a.S / world;
  const { numPidM } = sched.grid;
  const { cols, width } = copyEngineColumns(sched, numPidM, "kv block");
  const { order, slots } = consumerMaps(cols, width);
  const maps = tablesOf([order, ...slots]);
  // Each kv loop waits once per arrival group, before an inner loop over the group's blocks.
  const grouped = kvGroupTables(
    order.map,
    slots.map((s) => s.map),
    maps,
    world,
    numPidM,
  );
  const mapTables = [...maps, ...grouped.tables];
  const t = transformLocalKernel(
    kernel,
    { role: "consumer", order: order.map, slots: slots.map((s) => s.map), tables: mapTables.map((x) => x.name) },
    { kvGroups: grouped.groups },
  );
  const slotCount = Math.max(1, ...signals.slots.map((e) => e.slots.length));
  const rows = [SQ, view.N];
  const buffers: Buffer[] = [
    { name: ATTN_Q, shape: rows, dtype: o.dtype, symmetric: false, init: "random" },
    { name: tensor.name, shape: [a.S, view.K], dtype: o.dtype, symmetric: true, init: "random" },
    { name: ATTN_O, shape: rows, dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(slotCount, true),
  ];
  checkDistinctBuffers(buffers);
  const own = attentionBindings(op, kernel, a, tensor.name, { SQ: { kind: "int", value: SQ }, SKV: { kind: "int", value: a.S } });
  const inserted = consumerInsertedArgs(mapTables);
  const launch = attentionLaunch(op.tile.BM, a.headDim);
  const entry = localKernelEntry(t, {
    name: op.name,
    kind: "local-consumer",
    stream: "compute",
    // A persistent body (`# ovl: tile-loop` over (query block, head) work items) takes one
    // program per SM, which the one-GPU mode's SM budget can size; a plain one, a fixed grid.
    grid: kernel.persistent ? [{ kind: "num-sms", cap: Math.ceil(SQ / op.tile.BM) * a.heads }] : [Math.ceil(SQ / op.tile.BM), a.heads],
    numWarps: o.numWarps ?? launch.numWarps,
    numStages: o.numStages ?? launch.numStages,
    own,
    inserted,
    params: attentionParams(op, kernel, a, tensor.name, width),
    tileProgram: { role: "consumer", order: order.map, slots: slots.map((s) => s.map), numPidM, numPidN: 1 },
  });
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: slotCount, bits: 32 },
    tables: mapTables,
    kernels: [entry],
    hostOps: planHostOps(op.plan, signals),
    reference: attentionReference(a, tensor.name, world, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  return { files: [{ path: entry.source, text: t.source }], manifest };
}
