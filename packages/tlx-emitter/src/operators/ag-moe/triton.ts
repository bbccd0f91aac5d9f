// AllGather + Gather + grouped GEMM with the routing computed on the device (TileLink's MoE
// part 1, §4.1's dynamic maps): every rank holds its shard of the tokens X; the plan gathers
// X's rows; two routing kernels of the runner (`ovl_runtime.moe_align`) turn `topk_ids` into
// `sorted_token_ids` / `expert_of_block` / `num_blocks` on the device; the body, launched
// after them on the same stream, computes C[t·k + j] = X[t] @ W[topk_ids[t, j]] block by
// block, each block waiting on the chunk slots of the rows its table entries name.
import { operatorGemmParams } from "../../core/gemm-params.js";
import { lowerToTileSchedule, type TileSchedule } from "@ovl/chunk-plan";
import { staticMap, variable } from "@ovl/mapping";
import type { EmitResult } from "../../core/result.js";
import { checkDistinctBuffers, checkPlanAndSchedule, rowShards, signalBuffer, SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { planHostOps } from "../../schedule/host-ops.js";
import { gemmLaunch, resolveOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import { parseLocalKernel, transformLocalKernel, type GatherRows } from "../../local/index.js";
import { MANIFEST_SCHEMA, type Buffer, type Kernel, type KernelArg } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import { bindGemm, type Binding } from "../../core/bind.js";
import { planTensor } from "../../backends/triton/consumer.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { copyEngineColumns, consumerInsertedArgs, tablesOf } from "../../schedule/maps.js";
import { rowSegments, segmentMap, segmentSlotMaps } from "./segments.js";
import type { MoeRouting, Operator } from "../../core/operator.js";

/** Template kind of the transformed MoE body (a consumer that gathers rows through a table). */
export const LOCAL_MOE_KIND = "local-consumer";
/** Template kinds of the two routing kernels (`ovl_runtime.moe_align`). */
export const MOE_ALIGN_KINDS = { count: "moe-align-count", scatter: "moe-align-scatter" } as const;
/** Manifest buffers of an ag-moe operator, besides the gathered tokens (the plan's tensor). */
export const MOE_BUFFERS = {
  w: "moe_w",
  c: "moe_c",
  topkIds: "moe_topk_ids",
  counts: "moe_counts",
  sortedIds: "moe_sorted_token_ids",
  expertOfBlock: "moe_expert_of_block",
  numBlocks: "moe_num_blocks",
} as const;
/** Slots the routing kernels handle per step (`ovl_runtime.moe_align.CHUNK`). */
export const MOE_ALIGN_CHUNK = 256;
/**
 * ag-moe's tile where no tuned table has ag-moe entries (`resolveCompute`; the tables' MoE-1…6
 * entries decide otherwise): one n-block covers N per rank (192/256 at TileLink's MoE shapes), so
 * the gathered rows are read once. With 8 warps and 4 stages, in the non-persistent built-in body,
 * it is the fastest configuration at four of MoE-1…6 on one H100
 * (evidence: `results/runs/moe-blocks-h100-2026-11-27`).
 */
export const MOE_DEFAULT_TILE = { BM: 128, BN: 256, BK: 64 } as const;
/** At most this many programs run each routing kernel. */
export const MOE_ALIGN_MAX_PROGRAMS = 32;

/** The sizes of the device routing tables (as `ovl_runtime.moe_align.AlignSizes` computes them). */
export interface MoeAlignSizes {
  readonly tokens: number;
  readonly topk: number;
  readonly experts: number;
  readonly blockM: number;
  /** Token slots `T·k` (and the padding sentinel). */
  readonly slots: number;
  /** Blocks of the worst routing, `ceil((T·k + E·(BLOCK_M − 1)) / BLOCK_M)`. */
  readonly maxBlocks: number;
  /** Experts rounded up to a power of two (at least 2). */
  readonly expertsP2: number;
  /** Programs of each routing kernel. */
  readonly programs: number;
}

const pow2 = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));

/** The routing tables' sizes for `tokens` tokens. */
export function moeAlignSizes(tokens: number, routing: MoeRouting, blockM: number): MoeAlignSizes {
  const slots = tokens * routing.topk;
  return {
    tokens,
    topk: routing.topk,
    experts: routing.experts,
    blockM,
    slots,
    maxBlocks: Math.max(1, Math.ceil((slots + routing.experts * (blockM - 1)) / blockM)),
    expertsP2: Math.max(2, pow2(routing.experts)),
    programs: Math.min(MOE_ALIGN_MAX_PROGRAMS, Math.max(1, Math.ceil(slots / MOE_ALIGN_CHUNK))),
  };
}

/**
 * Checks an ag-moe routing: `experts` and `topk` positive integers with `topk <= experts`,
 * `choices` (the experts a checked run's random routing draws from) distinct experts in
 * `[0, experts)`, at least `topk` of them.
 * @throws {EmitError} `bad-param` naming the first fault.
 */
export function checkMoeRouting(moe: MoeRouting | undefined): MoeRouting {
  if (moe === undefined)
    throw new EmitError("bad-param", "an ag-moe operator needs moe: { experts, topk } (the number of experts and each token's)");
  const { experts, topk, choices } = moe;
  if (!Number.isSafeInteger(experts) || experts < 1)
    throw new EmitError("bad-param", `moe.experts must be a positive integer, got ${experts}`);
  if (!Number.isSafeInteger(topk) || topk < 1) throw new EmitError("bad-param", `moe.topk must be a positive integer, got ${topk}`);
  if (topk > experts)
    throw new EmitError("bad-param", `moe.topk (${topk}) exceeds moe.experts (${experts}): a token picks distinct experts`);
  if (choices !== undefined) {
    const seen = new Set<number>();
    for (const e of choices) {
      if (!Number.isInteger(e) || e < 0 || e >= experts)
        throw new EmitError("bad-param", `moe.choices names expert ${e}, outside [0, ${experts})`);
      if (seen.has(e)) throw new EmitError("bad-param", `moe.choices names expert ${e} twice`);
      seen.add(e);
    }
    if (seen.size < topk)
      throw new EmitError("bad-param", `moe.choices has ${seen.size} experts; each token needs topk = ${topk} distinct ones`);
  }
  return moe;
}

/** Bindings of a MoE body's weights (buffer `w`) and routing table parameters by name (`op.bind` wins). */
export function moeBindings(sizes: MoeAlignSizes, w: string = MOE_BUFFERS.w): Record<string, Binding> {
  const buffer = (name: string): Binding => ({ kind: "arg", arg: { kind: "buffer", name } });
  return {
    w_ptr: buffer(w),
    w: buffer(w),
    sorted_token_ids: buffer(MOE_BUFFERS.sortedIds),
    expert_of_block: buffer(MOE_BUFFERS.expertOfBlock),
    num_blocks_ptr: buffer(MOE_BUFFERS.numBlocks),
    num_blocks: buffer(MOE_BUFFERS.numBlocks),
    TOP_K: { kind: "constexpr", value: sizes.topk },
    top_k: { kind: "arg", arg: { kind: "int", value: sizes.topk } },
    MAX_BLOCKS: { kind: "arg", arg: { kind: "int", value: sizes.maxBlocks } },
    // The experts' count, for a body that describes the weights [E, K, N] to the TMA unit.
    E: { kind: "arg", arg: { kind: "int", value: sizes.experts } },
    EXPERTS: { kind: "arg", arg: { kind: "int", value: sizes.experts } },
  };
}

/**
 * Compile an ag-moe operator: `op.problem` is `{ M: tokens, N: intermediate, K: hidden }`,
 * `op.moe` the experts and top-k. The plan gathers the tokens `[M, K]` (row-sharded; any
 * AllGather the copy engine realises); the body (the built-in `moe_gather_gemm` or a user's
 * consumer annotated `rows=<index table>`) reads them through `sorted_token_ids`.
 * @throws {EmitError} for a bad routing, a body that does not gather through a table, a
 *   plan whose rows are delivered with several arrivals; {LocalKernelError} for a body the
 *   transformation refuses.
 */
export async function compileAgMoe(op: Operator, schedule?: TileSchedule): Promise<EmitResult> {
  const moe = checkMoeRouting(op.moe);
  const o = resolveOptions(op.options ?? {});
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "consumer" || kernel.rows === undefined) {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: an ag-moe body is a consumer that reads its rows through the routing's index table (# ovl: consumer gather=<tokens> rows=<sorted_token_ids>); ${kernel.entry} is not`,
    );
  }
  const { M: T, N, K } = op.problem;
  const params = operatorGemmParams(op);
  const sizes = moeAlignSizes(T, moe, op.tile.BM);
  const tensorName = planTensor(op, "AllGather+MoE");
  // One-row blocks: the slots every row of the gathered tensor waits on, on each rank.
  const sched =
    schedule ??
    lowerToTileSchedule(
      op.plan,
      { tensor: tensorName, problem: { M: T, N, K }, tile: { BM: 1, BN: N, BK: K }, persistent: null },
      { role: "consumer" },
    );
  const { signals, world, tensor } = checkPlanAndSchedule(op.plan, sched, "consumer");
  if (tensor.shape[0] !== T || tensor.shape[1] !== K)
    throw new EmitError(
      "bad-plan",
      `tensor ${tensor.name} is [${tensor.shape.join(", ")}]; ag-moe gathers the tokens as [M, K] = [${T}, ${K}]`,
    );
  if (tensor.dtype !== o.dtype) throw new EmitError("bad-plan", `tensor ${tensor.name} is ${tensor.dtype} but options.dtype is ${o.dtype}`);
  if (sched.tiling.tile.BM !== 1) throw new EmitError("bad-schedule", "an ag-moe schedule is lowered with one-row blocks (tile.BM = 1)");
  const { cols } = copyEngineColumns(sched, T, "row");
  const segments = rowSegments(cols.map((c) => c.slots));
  const segment = segmentMap(segments, world, "ovl_seg_of_row");
  const slots = segmentSlotMaps(segments, "ovl_wait");
  const mapTables = tablesOf([segment, ...slots]);
  const order = staticMap(variable("ovl_m", { min: 0, max: sizes.maxBlocks - 1 }));
  const gather: GatherRows = {
    blockRows: op.tile.BM,
    divisor: moe.topk,
    limit: sizes.slots,
    rowCount: T,
    segment: segment.map,
    // A block's slots read as one vector first (one acquire load each, all in flight), the loop only when one is short.
    segmentCount: segments.starts.length,
  };
  const t = transformLocalKernel(kernel, {
    role: "consumer",
    order,
    slots: slots.map((s) => s.map),
    tables: mapTables.map((x) => x.name),
    gather,
  });

  const slotCount = Math.max(1, ...signals.slots.map((e) => e.slots.length));
  const buffers: Buffer[] = [
    { name: tensor.name, shape: [T, K], dtype: o.dtype, symmetric: true, init: "random" },
    { name: MOE_BUFFERS.w, shape: [moe.experts, K, N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: MOE_BUFFERS.c, shape: [sizes.slots, N], dtype: o.dtype, symmetric: false, init: "poison" },
    ...routingBuffers(sizes, moe),
    signalBuffer(slotCount, true),
  ];
  checkDistinctBuffers(buffers);

  const names = kernel.params.map((p) => p.name);
  const byName = Object.fromEntries(Object.entries(moeBindings(sizes)).filter(([p]) => names.includes(p)));
  const own = bindGemm(
    names,
    { buffers: { a: tensor.name, b: MOE_BUFFERS.w, c: MOE_BUFFERS.c }, params: { a: kernel.operand }, ...params },
    { ...byName, ...op.bind },
  );
  const rowsBinding = own.get(kernel.rows);
  if (rowsBinding?.kind !== "arg" || rowsBinding.arg.kind !== "buffer" || rowsBinding.arg.name !== MOE_BUFFERS.sortedIds) {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: rows=${kernel.rows} must read the routing's ${MOE_BUFFERS.sortedIds} (name it sorted_token_ids or bind it to that buffer)`,
    );
  }
  const inserted = consumerInsertedArgs(mapTables);
  const numPidN = Math.ceil(N / op.tile.BN);
  const body = localKernelEntry(t, {
    name: op.name,
    kind: LOCAL_MOE_KIND,
    stream: "compute",
    grid: kernel.persistent ? [{ kind: "num-sms", cap: sizes.maxBlocks * numPidN }] : [sizes.maxBlocks * numPidN],
    ...gemmLaunch(o, params, "registers"),
    own,
    inserted,
    params: { ...params, ...moeBodyParams(op.body.path, kernel.entry, slots.length, tensor.name, moe) },
    tileProgram: {
      role: "consumer",
      order,
      slots: slots.map((s) => s.map),
      numPidM: sizes.maxBlocks,
      numPidN,
      gather: { ...gather, rows: MOE_BUFFERS.sortedIds },
    },
  });
  const routingSource = `${op.name}_routing.py`;
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: slotCount, bits: 32 },
    tables: mapTables,
    kernels: [...routingKernels(sizes, routingSource), body],
    hostOps: planHostOps(op.plan, signals),
    reference: {
      operator: "ag-moe",
      M: T,
      N,
      K,
      inputs: { A: tensor.name, B: MOE_BUFFERS.w, topk: MOE_BUFFERS.topkIds },
      output: MOE_BUFFERS.c,
      ...rowShards(T, world),
      tolerance: o.tolerance,
    },
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  return {
    files: [
      { path: routingSource, text: routingModule() },
      { path: body.source, text: t.source },
    ],
    manifest,
  };
}

/**
 * The routing's buffers: `topk_ids [T, k]` (drawn fresh per checked run, the same on every
 * rank, from `moe.choices`) and the tables the routing kernels write from it.
 */
/** The template params the MoE body's kernel entry carries beside its constexprs (both compile paths): its file and
 * entry, the gathered tensor `a`, the routing buffers, the experts and top-k, and the slot columns it waits on. */
export function moeBodyParams(
  body: string,
  entry: string,
  slotColumns: number,
  a: string,
  moe: MoeRouting,
): Record<string, string | number> {
  return {
    body,
    entry,
    operator: "ag-moe",
    slotColumns,
    a,
    b: MOE_BUFFERS.w,
    c: MOE_BUFFERS.c,
    experts: moe.experts,
    topk: moe.topk,
    sortedIds: MOE_BUFFERS.sortedIds,
    expertOfBlock: MOE_BUFFERS.expertOfBlock,
    numBlocks: MOE_BUFFERS.numBlocks,
  };
}

export function routingBuffers(s: MoeAlignSizes, moe: MoeRouting): Buffer[] {
  const i32 = (name: string, shape: number[], init: Buffer["init"]): Buffer => ({ name, shape, dtype: "int32", symmetric: false, init });
  return [
    {
      ...i32(MOE_BUFFERS.topkIds, [s.tokens, moe.topk], "routing"),
      routing: { experts: moe.experts, ...(moe.choices === undefined ? {} : { choices: [...moe.choices] }) },
    },
    i32(MOE_BUFFERS.counts, [s.programs, s.expertsP2], "zeros"),
    i32(MOE_BUFFERS.sortedIds, [s.maxBlocks * s.blockM], "poison"),
    i32(MOE_BUFFERS.expertOfBlock, [s.maxBlocks], "poison"),
    i32(MOE_BUFFERS.numBlocks, [2], "zeros"),
  ];
}

/** The emitted module of the routing kernels: they live in the runner, this file names them. */
export function routingModule(anyRows = false): string {
  return [
    '"""MoE routing tables on the device: the two kernels of ovl_runtime.moe_align (sorted_token_ids,',
    "expert_of_block and num_blocks from topk_ids), launched before the grouped GEMM on every rank.",
    "",
    'Emitted by @ovl/tlx-emitter; the kernels are the runner\'s, so the torch API and a manifest run the same code."""',
    anyRows
      ? // Their copies that Triton does not specialise on the sizes, which change with the row count.
        "from ovl_runtime.moe_align import moe_align_count_rows as moe_align_count, moe_align_scatter_rows as moe_align_scatter  # noqa: F401"
      : "from ovl_runtime.moe_align import moe_align_count, moe_align_scatter  # noqa: F401",
    "",
  ].join("\n");
}

/** The manifest entries of the two routing kernels (arguments as `ovl_runtime.moe_align.launch_align` passes them). */
export function routingKernels(s: MoeAlignSizes, source: string): Kernel[] {
  const buffer = (name: string): KernelArg => ({ kind: "buffer", name });
  const int = (value: number): KernelArg => ({ kind: "int", value });
  const per = Math.ceil(s.slots / s.programs);
  const common = { source, stream: "compute" as const, grid: [s.programs], numWarps: 4, numStages: 1 };
  const params = { experts: s.experts, topk: s.topk, tokens: s.tokens, BLOCK_M: s.blockM, programs: s.programs };
  return [
    {
      name: "moe_align_count",
      entry: "moe_align_count",
      ...common,
      args: [
        { name: "topk_ids_ptr", value: buffer(MOE_BUFFERS.topkIds) },
        { name: "counts_ptr", value: buffer(MOE_BUFFERS.counts) },
        { name: "NUMEL", value: int(s.slots) },
        { name: "PER", value: int(per) },
      ],
      constexprs: { NUM_EXPERTS: s.experts, E_P2: s.expertsP2, CHUNK_SIZE: MOE_ALIGN_CHUNK },
      template: { kind: MOE_ALIGN_KINDS.count, params },
    },
    {
      name: "moe_align_scatter",
      entry: "moe_align_scatter",
      ...common,
      args: [
        { name: "topk_ids_ptr", value: buffer(MOE_BUFFERS.topkIds) },
        { name: "counts_ptr", value: buffer(MOE_BUFFERS.counts) },
        { name: "sorted_ids_ptr", value: buffer(MOE_BUFFERS.sortedIds) },
        { name: "expert_of_block_ptr", value: buffer(MOE_BUFFERS.expertOfBlock) },
        { name: "num_blocks_ptr", value: buffer(MOE_BUFFERS.numBlocks) },
        { name: "NUMEL", value: int(s.slots) },
        { name: "PER", value: int(per) },
        { name: "MAX_BLOCKS", value: int(s.maxBlocks) },
        { name: "PER_B", value: int(Math.ceil(s.maxBlocks / s.programs)) },
        { name: "PROGRAMS", value: int(s.programs) },
      ],
      constexprs: {
        NUM_EXPERTS: s.experts,
        E_P2: s.expertsP2,
        P_P2: Math.max(2, pow2(s.programs)),
        BLOCK_M: s.blockM,
        CHUNK_SIZE: MOE_ALIGN_CHUNK,
        BLOCKS_STEP: Math.max(1, Math.floor(MOE_ALIGN_CHUNK / s.blockM)),
      },
      template: { kind: MOE_ALIGN_KINDS.scatter, params },
    },
  ];
}
