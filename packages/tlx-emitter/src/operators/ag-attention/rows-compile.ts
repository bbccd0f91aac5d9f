// Compiling sequence-parallel attention for any sequence length (`Operator.rows`): the persistent flash-attention
// body transformed with the kv order and arrival groups of `rows.ts` over the inserted `ovl_rows` parameter (S, every
// rank's positions), its own SQ and SKV bound to S / world and S, the kv AllGather as host ops over S, the whole plan
// checked at every S served, and the manifest written at the operator's S with its `rows` section.
import { floorDiv } from "@ovl/mapping";
import { checkDistinctBuffers, signalBuffer, SIGNAL_BUFFER, worldOf } from "../../backends/triton/common.js";
import { localKernelEntry } from "../../backends/triton/kernel-entry.js";
import { MANIFEST_SCHEMA, type Buffer, type Manifest, type Table } from "../../core/manifest/schema.js";
import type { Operator, RowsRequest } from "../../core/operator.js";
import { resolveOptions } from "../../core/options.js";
import type { EmitResult } from "../../core/result.js";
import { EmitError } from "../../core/writer/index.js";
import { transformLocalKernel } from "../../local/index.js";
import { consumerInsertedArgs } from "../../schedule/maps.js";
import { ROWS_PLAN } from "../ag-gemm/rows-compile.js";
import { agRowsHostOps, agRowsMaps, agRowsTileMaps, ROWS_VARIABLE, rowsShape } from "../ag-gemm/rows.js";
import { checkRowsAt, rowsManifest, rowsSection } from "../rows-mode.js";
import { KV_GROUP_BLOCK_TABLE, KV_GROUP_TABLES } from "./kv-groups.js";
import { attentionRowsGroups, checkAgAttentionRows, groupValuesAt } from "./rows.js";
import {
  ATTN_O,
  ATTN_Q,
  attentionBindings,
  attentionBody,
  attentionLaunch,
  attentionParams,
  attentionReference,
  checkAttention,
  checkAttentionView,
  gatheredTensor,
} from "./triton.js";

/**
 * Compile `op` (an `ag-attention` whose plan is the swizzle push AllGather of kv, at its problem's S) into one
 * operator serving every sequence length S of `req` (the row count: every rank's positions, a multiple of the
 * world); heads, kv heads, head dimension, causality and the tile are fixed. The manifest describes it at
 * `op.attention.S`; its `rows` section makes it concrete at another S (`instantiateRows`).
 * @throws {EmitError} `bad-param` for a body that is not persistent, another plan, a range rows mode cannot serve or
 *   an attention problem `checkAttention` refuses; `bad-schedule` when the plan fails its check at some S (a bug,
 *   named with the S).
 */
export async function compileAgAttentionRows(op: Operator, req: RowsRequest): Promise<EmitResult> {
  const o = resolveOptions(op.options ?? {});
  const kernel = await attentionBody(op);
  if (!kernel.persistent) {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: any sequence length needs a persistent body (# ovl: tile-loop): its grid cannot depend on S`,
    );
  }
  const kv = gatheredTensor(op);
  if (op.plan.name !== ROWS_PLAN) {
    throw new EmitError("bad-param", `any sequence length realises the ${ROWS_PLAN} plan at every S; plan "${op.plan.name}" is another`);
  }
  const world = worldOf(op.plan);
  const a = checkAttention(op.attention, world, op.tile);
  const view = checkAttentionView(op, a);
  const at = a.S;
  const shape = rowsShape(req, world, op.tile.BN, view.K);
  const maps = agRowsMaps(shape);
  checkRowsAt(at, shape, world);
  const hostOps = agRowsHostOps(shape, maps, kv);
  const groups = attentionRowsGroups(shape, maps);
  checkAgAttentionRows(shape, maps, hostOps, groups, a.causal ? op.tile.BM : undefined);
  const table = (name: string, values: number[][]): Table => ({ name, dtype: "int32", values });
  const tables = [
    table(KV_GROUP_TABLES.starts, groupValuesAt(groups.starts, at)),
    table(KV_GROUP_TABLES.waitAt, groups.waitAt),
    table(KV_GROUP_TABLES.waits, groups.waits),
    table(KV_GROUP_BLOCK_TABLE, groupValuesAt(groups.firsts, at)),
  ];
  const { order, slots } = agRowsTileMaps(maps);
  const t = transformLocalKernel(
    kernel,
    { role: "consumer", order, slots, tables: tables.map((x) => x.name), scalars: [ROWS_VARIABLE] },
    { kvGroups: { count: groups.count, ...KV_GROUP_TABLES, firsts: KV_GROUP_BLOCK_TABLE } },
  );
  const SQ = at / world;
  const buffers: Buffer[] = [
    { name: ATTN_Q, shape: [SQ, view.N], dtype: o.dtype, symmetric: false, init: "random" },
    { name: kv, shape: [at, view.K], dtype: o.dtype, symmetric: true, init: "random" },
    { name: ATTN_O, shape: [SQ, view.N], dtype: o.dtype, symmetric: false, init: "poison" },
    signalBuffer(world * shape.split, true),
  ];
  checkDistinctBuffers(buffers);
  const launch = attentionLaunch(op.tile.BM, a.headDim);
  const entry = localKernelEntry(t, {
    name: op.name,
    kind: "local-consumer",
    stream: "compute",
    // The work items (query block, head) of the longest sequence served: the grid does not depend on S.
    grid: [{ kind: "num-sms", cap: Math.ceil(shape.max / world / op.tile.BM) * a.heads }],
    numWarps: o.numWarps ?? launch.numWarps,
    numStages: o.numStages ?? launch.numStages,
    own: attentionBindings(op, kernel, a, kv, { SQ: { kind: "rows", divisor: world }, SKV: { kind: "rows" } }),
    inserted: { ...consumerInsertedArgs(tables), [ROWS_VARIABLE]: { kind: "rows" } },
    params: attentionParams(op, kernel, a, kv, slots.length),
    tileProgram: { role: "consumer", order, slots, numPidM: Math.ceil(at / op.tile.BN), numPidN: 1 },
  });
  const perRank = floorDiv(maps.M, world);
  const symbolic: Manifest = {
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: world * shape.split, bits: 32 },
    tables,
    kernels: [entry],
    hostOps: [],
    reference: attentionReference(a, kv, world, o.tolerance),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
    rows: rowsSection(req, shape, world, at, {
      buffers: { [ATTN_Q]: perRank, [kv]: maps.M, [ATTN_O]: perRank },
      hostOps,
      numPidM: maps.numPidM,
      tables: { [KV_GROUP_TABLES.starts]: groups.starts, [KV_GROUP_BLOCK_TABLE]: groups.firsts },
    }),
  };
  return { files: [{ path: entry.source, text: t.source }], manifest: rowsManifest(symbolic) };
}
