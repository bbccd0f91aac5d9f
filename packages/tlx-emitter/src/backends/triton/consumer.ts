// What every AllGather+<body> operator shares (AutoOverlap §5.2's consumer; TileLink's
// AG+GEMM and AG+GroupGEMM): the plan's transfers on the copy engine with stream-written
// chunk signals, and the body transformed to visit m-blocks in arrival order and wait, per
// tile, on every chunk slot its rows meet (several where chunks do not fall on tile
// boundaries). The operators differ only in the buffers, tables and bindings the body reads
// beyond the gathered operand, and in the reference.
import { operatorGemmParams } from "../../core/gemm-params.js";
import type { TileSchedule } from "@ovl/chunk-plan";
import { type GemmParams, nvshmemSlot, nvshmemSlotCount } from "./kernels/index.js";
import { nvshmemTransfers } from "./nvshmem.js";
import { MANIFEST_SCHEMA, type Buffer, type Reference, type Table } from "../../core/manifest/schema.js";
import { checkDistinctBuffers, checkPlanAndSchedule, signalBuffer, SIGNAL_BUFFER } from "./common.js";
import type { EmitResult } from "../../core/result.js";
import { planHostOps } from "../../schedule/host-ops.js";
import { gemmLaunch, resolveOptions } from "../../core/options.js";
import { validated } from "../../core/manifest/validate.js";
import { parseLocalKernel, transformLocalKernel } from "../../local/index.js";
import { EmitError } from "../../core/writer/index.js";
import { bindGemm, type Binding } from "../../core/bind.js";
import { streamKScratch } from "../../schedule/stream-k.js";
import { localKernelEntry } from "./kernel-entry.js";
import { consumerMaps, copyEngineColumns, consumerInsertedArgs, tablesOf } from "../../schedule/maps.js";
import type { Operator } from "../../core/operator.js";
import { operatorSchedule } from "../../schedule/operator-schedule.js";

/** Template kind of a transformed consumer body in the manifest. */
export const LOCAL_CONSUMER_KIND = "local-consumer";

/** What one consumer operator adds to the shared path, given the gathered tensor's name. */
export interface ConsumerSpec {
  /** `template.params.operator` of the kernel (the runner's engines dispatch on it). */
  readonly operator: "ag-gemm" | "ag-grouped-gemm" | "a2a-gemm" | "ag-gemm-silu";
  /** The operator as errors name it (e.g. `AllGather+GEMM`). */
  readonly title: string;
  /**
   * How the received tensor starts a launch (default `random`: an AllGather's own shard is
   * in place; `poison` where the plan's copies write every row, an AllToAll's own slab included).
   */
  readonly receivedInit?: "random" | "poison";
  /** Buffers the plan reads besides the received tensor (e.g. an AllToAll's send buffer), given its name. */
  readonly sources?: (received: string) => readonly Buffer[];
  /** The body's other operand (`b`) and its output (`c`); both local, `c` poisoned. */
  readonly b: Buffer;
  readonly c: Buffer;
  /** Tables the body reads besides the compiler's maps, given the world (one row per rank). */
  readonly tables?: (world: number) => readonly Table[];
  /** Local inputs the body reads besides `b` (fp8's scales), allocated per rank. */
  readonly inputs?: readonly Buffer[];
  /** Bindings of body parameters by name, applied when the body has the parameter; `op.bind` wins. */
  readonly byName?: Readonly<Record<string, Binding>>;
  /** Checks the body's bound parameters (e.g. that one reads a table). */
  readonly checkBindings?: (own: ReadonlyMap<string, Binding>, entry: string) => void;
  /** Extra `template.params` of the kernel. */
  readonly params?: Readonly<Record<string, number | string | boolean>>;
  /** The manifest's reference, given the gathered tensor's name, the world and the tolerance. */
  readonly reference: (a: string, world: number, tolerance: number, params: GemmParams) => Reference;
}

/**
 * Compile a consumer operator: `op.plan` gathers the rows of the body's gathered operand
 * (any AllGather template or hand-written plan the copy engine can realise), the body reads
 * them once their chunk slots are signalled.
 * @throws {EmitError} for a plan and body that do not fit together, slots with several
 *   writers, or bad options; {LocalKernelError} for a body that cannot be transformed.
 */
export async function compileConsumer(op: Operator, spec: ConsumerSpec, schedule?: TileSchedule): Promise<EmitResult> {
  const o = resolveOptions(op.options ?? {});
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "consumer") {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: ${spec.title} needs a consumer body (# ovl: consumer gather=<param>); ${kernel.entry} is a ${kernel.role}`,
    );
  }
  if (kernel.waitsPer === "kv-block") {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: ${kernel.entry} waits per kv block of an inner loop (# ovl: tile kv=), an attention body: compile it as kind ag-attention; ${spec.title} waits per tile (# ovl: tile m=)`,
    );
  }
  const { M, K } = op.problem;
  const tensorName = planTensor(op, spec.title);
  const sched = schedule ?? operatorSchedule(op, tensorName, "consumer", kernel.persistent);
  const { signals, world, tensor } = checkPlanAndSchedule(op.plan, sched, "consumer");
  if (tensor.shape[1] !== K)
    throw new EmitError(
      "bad-plan",
      `tensor ${tensor.name} is [${tensor.shape.join(", ")}]; the ${spec.title} reads it as [M, K] = [${M}, ${K}]`,
    );
  if (tensor.dtype !== o.dtype) throw new EmitError("bad-plan", `tensor ${tensor.name} is ${tensor.dtype} but options.dtype is ${o.dtype}`);
  const params = operatorGemmParams(op);
  const { numPidM, numTiles } = sched.grid;
  const nvshmem = o.backend === "nvshmem";
  if (nvshmem && spec.operator !== "ag-gemm")
    throw new EmitError(
      "unsupported-op",
      `the nvshmem transfer backend realises AllGather+GEMM's pushes; ${spec.title} takes copy-engine transfers`,
    );
  const { cols: planCols, width } = copyEngineColumns(sched, numPidM, "m-block");
  // Under NVSHMEM a chunk's slot s is the low half of the 64-bit signal word at int32 slot 2s.
  const cols = nvshmem
    ? planCols.map((c) => ({ ...c, slots: c.slots.map((col) => col.map((x) => (x < 0 ? x : nvshmemSlot(x)))) }))
    : planCols;
  const { order, slots } = consumerMaps(cols, width);
  const mapTables = tablesOf([order, ...slots]);
  const t = transformLocalKernel(kernel, {
    role: "consumer",
    order: order.map,
    slots: slots.map((s) => s.map),
    tables: mapTables.map((x) => x.name),
  });
  const planSlots = Math.max(1, ...signals.slots.map((e) => e.slots.length));
  const slotCount = nvshmem ? nvshmemSlotCount(planSlots) : planSlots;
  const transfers = nvshmem ? nvshmemTransfers(op.plan, signals, world, tensor.name, o, slotCount) : undefined;
  const names = kernel.params.map((p) => p.name);
  const scratch = streamKScratch(names, params.BLOCK_M, params.BLOCK_N);
  const buffers: Buffer[] = [
    { name: tensor.name, shape: [M, K], dtype: o.dtype, symmetric: true, init: spec.receivedInit ?? "random" },
    ...(spec.sources?.(tensor.name) ?? []),
    spec.b,
    ...(spec.inputs ?? []),
    spec.c,
    signalBuffer(slotCount, !nvshmem),
    ...scratch.buffers,
  ];
  checkDistinctBuffers(buffers);
  const tables = [...mapTables, ...(spec.tables?.(world) ?? []), ...(transfers === undefined ? [] : [transfers.table])];
  const tableNames = new Set<string>();
  for (const x of tables) {
    if (tableNames.has(x.name)) throw new EmitError("bad-param", `table ${x.name} is declared twice`);
    tableNames.add(x.name);
  }
  const byName = Object.fromEntries(Object.entries(spec.byName ?? {}).filter(([p]) => names.includes(p)));
  const own = bindGemm(
    names,
    { buffers: { a: tensor.name, b: spec.b.name, c: spec.c.name }, params: { a: kernel.operand }, ...params },
    { ...scratch.bindings, ...byName, ...op.bind },
  );
  spec.checkBindings?.(own, kernel.entry);
  const inserted = consumerInsertedArgs(mapTables);
  const entry = localKernelEntry(t, {
    name: op.name,
    kind: LOCAL_CONSUMER_KIND,
    stream: "compute",
    // Beside the NVSHMEM kernel the persistent GEMM leaves it its SMs: a GEMM program spinning on
    // a chunk must not hold the SM the put of that chunk needs.
    grid: kernel.persistent ? [{ kind: "num-sms", cap: numTiles, ...(nvshmem ? { reserve: o.commSms } : {}) }] : [numTiles],
    ...gemmLaunch(o, params),
    own,
    inserted,
    params: {
      ...params,
      body: op.body.path,
      entry: kernel.entry,
      operator: spec.operator,
      slotColumns: width,
      a: tensor.name,
      b: spec.b.name,
      c: spec.c.name,
      ...spec.params,
    },
    tileProgram: { role: "consumer", order: order.map, slots: slots.map((s) => s.map), numPidM, numPidN: sched.grid.numPidN },
  });
  const manifest = validated({
    $schema: MANIFEST_SCHEMA,
    name: op.name,
    world,
    dtype: o.dtype,
    buffers,
    signals: { buffer: SIGNAL_BUFFER, slots: slotCount, bits: 32 },
    tables,
    kernels: transfers === undefined ? [entry] : [entry, transfers.kernel],
    hostOps: transfers === undefined ? planHostOps(op.plan, signals) : [],
    reference: spec.reference(tensor.name, world, o.tolerance, params),
    timing: o.timing,
    waitTimeoutNs: o.waitTimeoutNs,
  });
  const files = [{ path: entry.source, text: t.source }];
  if (transfers !== undefined) files.push(transfers.file);
  return { files, manifest };
}

/** The one 2-D tensor an AllGather plan gathers. */
export function planTensor(op: Operator, title: string): string {
  const moved = new Set(op.plan.ranks.flatMap((r) => r.streams.flatMap((s) => s.map((x) => x.dst.tensor))));
  const [name, other] = [...moved];
  if (name === undefined) throw new EmitError("bad-plan", `plan "${op.plan.name}" moves nothing`);
  if (other !== undefined)
    throw new EmitError("bad-plan", `plan "${op.plan.name}" writes tensors ${[...moved].join(", ")}; an ${title} plan gathers one`);
  return name;
}
