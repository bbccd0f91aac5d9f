// Compiling MoE + ReduceScatter for any token count (`Operator.rows`): the body transformed with the slab map of
// `rows.ts` printed over the inserted `ovl_rows` parameter (its padding sentinel and last row too), the routing on a
// fixed grid, the runner kernels' sizes as run-time arguments, persistent grids capped at the most tokens served, the
// whole manifest checked at every T served against the per-T compile, and written at the operator's T with its `rows`.
import { mul, sub } from "@ovl/mapping";
import type { Operator, RowsRequest } from "../../core/operator.js";
import type { Rows } from "../../core/manifest/schema.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { transformLocalKernel, type GatherRows } from "../../local/index.js";
import { ROWS_VARIABLE } from "../ag-gemm/rows.js";
import { MOE_BUFFERS, routingModule } from "../ag-moe/triton.js";
import { MOE_ROWS_PROGRAMS } from "../ag-moe/rows.js";
import { checkRowsAt, rowsManifest, rowsSection } from "../rows-mode.js";
import { checkMoeRsRows, moeRsRowsMaps, type MoeRsRowsShape } from "./rows.js";
import {
  MOE_RS_BUFFERS,
  MOE_RS_DEFAULT_REDUCERS,
  moeRsFiles,
  moeRsFront,
  moeRsLayout,
  moeRsManifest,
  moeRsModule,
  moeRsProgram,
  moeRsSizes,
} from "./triton.js";

/** The pieces of `op`'s operator for every token count of `req` before its check (`checkMoeRsRows`): see {@link compileMoeRsRows}. */
export async function planMoeRsRows(op: Operator, req: RowsRequest) {
  const f = await moeRsFront(op);
  const { s: at, tile, moe, world } = f;
  if (req.split !== undefined && req.split !== at.slabsPerRank)
    throw new EmitError("bad-param", `rows.split (${req.split}) must be the plan's ${at.slabsPerRank} slabs per rank`);
  const slabs = world * at.slabsPerRank;
  const min = req.min ?? slabs;
  const max = req.max ?? Math.max(min, 32768 - (32768 % slabs));
  const shape: MoeRsRowsShape = {
    world,
    slabsPerRank: at.slabsPerRank,
    blockM: tile.BM,
    ...(tile.BT === undefined ? {} : { blockT: tile.BT }),
    hidden: op.problem.N,
    blockN: tile.BN,
    routing: moe,
    min,
    max,
  };
  const maps = moeRsRowsMaps(shape);
  checkRowsAt(at.tokens, shape, slabs);
  const sizesAt = (T: number) => moeRsSizes({ tokens: T, inter: op.problem.K, hidden: op.problem.N, world, slabT: T / slabs }, moe, tile);
  const most = sizesAt(max);
  const fixed = { most, reducers: Math.max(1, Math.min(MOE_RS_DEFAULT_REDUCERS, sizesAt(min).reduceItems)) };

  const program = moeRsProgram({ ...f, s: most }, maps.segment);
  const gather: GatherRows = {
    blockRows: tile.BM,
    divisor: moe.topk,
    limit: at.align.slots,
    rowCount: at.tokens,
    segment: program.segment,
    segmentCount: slabs,
    runtime: { limit: maps.slots, last: sub(maps.M, 1) },
  };
  const t = transformLocalKernel(f.kernel, {
    role: "producer",
    order: program.order,
    slots: program.slots,
    numPidN: at.nTiles,
    tables: [],
    scalars: [ROWS_VARIABLE],
    gather,
    owners: program.owners,
  });
  const files = moeRsFiles(op.name);
  const rows = { fixed, inserted: { [ROWS_VARIABLE]: { kind: "rows" as const } }, programs: MOE_ROWS_PROGRAMS };
  const layout = moeRsLayout(op, f, t, program, at, files, rows);
  const [count, scatter] = layout.kernels;
  const routing = { NUMEL: maps.slots, PER: maps.perSlots };
  const tokens = { tokens: maps.M };
  const expect = { SLOTS: maps.slots, SLAB_T: maps.slabT };
  const overM: Rows["kernels"] = {
    [count!.name]: { args: routing, params: tokens },
    [scatter!.name]: { args: { ...routing, MAX_BLOCKS: maps.maxBlocks, PER_B: maps.perBlocks }, params: tokens },
    moe_permute_rows: { args: { SLOTS: maps.slots }, grid: [maps.maxBlocks], params: { slots: maps.slots } },
    moe_slab_expect: { args: expect, params: { ...tokens, slabT: maps.slabT } },
    [layout.producer]: {
      // A body's GEMM M is the slots (`bindGemm`), as is its SLOTS.
      args: { M: maps.slots, SLOTS: maps.slots, MAX_BLOCKS: maps.maxBlocks },
      ...(f.kernel.persistent ? {} : { grid: [mul(maps.maxBlocks, at.nTiles)] }),
      params: tokens,
      gather: { limit: maps.slots, rowCount: maps.M },
    },
    moe_topk_sum: { args: { T: maps.M }, grid: [maps.topkSumPrograms], params: tokens },
    moe_topk_reduce_rs: { args: { SLAB_T: maps.slabT }, params: { ...tokens, slabT: maps.slabT } },
  };
  // Only the kernels this body launches, and of them only the int arguments they take (the check finds any missing).
  const present = new Map(layout.kernels.map((k) => [k.name, new Set(k.args.map((a) => a.name))]));
  const kernels = Object.fromEntries(
    Object.entries(overM)
      .filter(([name]) => present.has(name))
      .map(([name, k]) => [
        name,
        { ...k, ...(k.args && { args: Object.fromEntries(Object.entries(k.args).filter(([a]) => present.get(name)!.has(a))) }) },
      ]),
  );
  const hBlocks = mul(maps.maxBlocks, tile.BM);
  const section = rowsSection(req, shape, slabs, at.tokens, {
    buffers: {
      [MOE_RS_BUFFERS.h]: maps.slots,
      [MOE_RS_BUFFERS.hBlocks]: hBlocks,
      [MOE_BUFFERS.topkIds]: maps.M,
      [MOE_BUFFERS.sortedIds]: hBlocks,
      [MOE_BUFFERS.expertOfBlock]: maps.maxBlocks,
      [MOE_RS_BUFFERS.topkWeights]: maps.M,
      [MOE_RS_BUFFERS.partial]: maps.slots,
      [MOE_RS_BUFFERS.partialTok]: maps.M,
      [MOE_RS_BUFFERS.out]: maps.rowsPerRank,
    },
    hostOps: [],
    numPidM: maps.maxBlocks,
    kernels,
  });
  const made = new Set(layout.buffers.map((b) => b.name));
  const rowsPart = { ...section, buffers: Object.fromEntries(Object.entries(section.buffers).filter(([b]) => made.has(b))) };
  const plan = { buffers: layout.buffers, kernels: layout.kernels, rows: rowsPart };
  // The per-T compile as it would cap its persistent grids at T (the check wants the fixed caps at least those); the
  // per-tile reducer's programs, a constexpr, the fixed ones.
  const perT = (T: number) => {
    const s = sizesAt(T);
    return moeRsLayout(op, f, t, program, s, files, { ...rows, fixed: { ...fixed, most: s } });
  };
  return { f, shape, maps, plan, perT, files, layout, source: t.source, rowsPart };
}

/**
 * Compile `op` (a `moe-rs` whose plan is the direct ReduceScatter of its slot rows at its problem's T) into one
 * operator serving every token count of `req` (default: one token a slab up to 32768, multiples of the slabs). The
 * slabs per rank are the plan's. The manifest describes it at `op.problem.M`; its `rows` section makes it concrete at
 * another T (`instantiateRows`).
 * @throws {EmitError} `bad-param` for what the per-T compile refuses or a range rows mode cannot serve; `bad-schedule`
 *   when the manifest fails its check at some T (a bug, named with the T).
 */
export async function compileMoeRsRows(op: Operator, req: RowsRequest): Promise<EmitResult> {
  const { f, shape, maps, plan, perT, files, layout, source, rowsPart } = await planMoeRsRows(op, req);
  checkMoeRsRows(shape, maps, plan, perT);
  return {
    files: [
      { path: files.routing, text: routingModule(true) },
      { path: files.runner, text: moeRsModule(true) },
      { path: layout.source, text: source },
    ],
    manifest: rowsManifest({ ...moeRsManifest(op, f, f.s, layout), rows: rowsPart }),
  };
}
