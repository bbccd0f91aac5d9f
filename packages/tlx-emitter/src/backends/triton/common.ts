// What both emitters share: the result type, the checks that a plan and its schedule
// belong together, the signal buffer and kernel entries of a manifest.
import { type ChunkPlan, partition, planSignals, type TensorDecl, type TileSchedule } from "@ovl/chunk-plan";
import type { Buffer, GridDim, Kernel, KernelArg, Reference, Table } from "../../core/manifest/schema.js";
import { type KernelTemplateInfo, SLOT_WAIT, slotWaitSource } from "./kernels/index.js";
import type { ElementType } from "../../core/device/index.js";
import { checkIdentifier, EmitError } from "../../core/writer/index.js";
import type { PlanSignals } from "../../schedule/host-ops.js";
import type { EmittedFile } from "../../core/result.js";

/** Name of the signal buffer in every emitted manifest. */
export const SIGNAL_BUFFER = "signals";

/** World size of a plan (product of the mesh levels). */
export function worldOf(plan: ChunkPlan): number {
  return plan.mesh.shape.reduce((a, s) => a * s, 1);
}

/**
 * Checks that `schedule` was lowered from `plan` with `role`, covers every rank, and
 * names a 2-D tensor of the plan; returns the plan's signals and that tensor.
 * @throws {EmitError} `bad-plan` / `bad-schedule`.
 */
export function checkPlanAndSchedule(
  plan: ChunkPlan,
  schedule: TileSchedule,
  role: "consumer" | "producer",
): { signals: PlanSignals; world: number; tensor: TensorDecl } {
  if (schedule.plan !== plan.name) {
    throw new EmitError("bad-schedule", `the schedule was lowered from plan "${schedule.plan}", not "${plan.name}"`);
  }
  if (schedule.role !== role) {
    throw new EmitError(
      "bad-schedule",
      `this emitter needs a ${role} schedule, got a ${schedule.role} one (lowerToTileSchedule's role option)`,
    );
  }
  const world = worldOf(plan);
  const ranks = schedule.ranks.map((r) => r.rank).sort((a, b) => a - b);
  if (ranks.length !== world || ranks.some((r, i) => r !== i)) {
    throw new EmitError("bad-schedule", `the schedule covers ranks [${ranks.join(", ")}], not 0..${world - 1}`);
  }
  const tensor = plan.tensors.find((t) => t.name === schedule.tiling.tensor);
  if (tensor === undefined || tensor.shape.length !== 2) {
    throw new EmitError("bad-plan", `the schedule's tensor "${schedule.tiling.tensor}" must be a 2-D tensor of the plan`);
  }
  if (tensor.strides !== undefined && (tensor.strides[0] !== tensor.shape[1] || tensor.strides[1] !== 1)) {
    throw new EmitError("bad-plan", `tensor ${tensor.name} must be row-major contiguous for the GEMM templates`);
  }
  for (const t of plan.tensors) checkIdentifier(t.name, `plan tensor name`);
  const signals = plan.signals ?? planSignals(plan).signals;
  if (signals === undefined) throw new EmitError("bad-plan", `plan "${plan.name}" has no signals`);
  return { signals, world, tensor };
}

/** Buffer names must be distinct (plan tensors and emitter buffers share one namespace). */
export function checkDistinctBuffers(buffers: readonly Buffer[]): void {
  const seen = new Set<string>();
  for (const b of buffers) {
    if (seen.has(b.name)) {
      throw new EmitError(
        "bad-plan",
        `buffer name "${b.name}" is used twice; rename the plan tensor that collides with the emitter's buffers`,
      );
    }
    seen.add(b.name);
  }
}

/**
 * The grid of an SM communication kernel with `count` rows of work: `commSms` programs at most,
 * as a `num-sms` dimension, so that a runner with fewer SMs to give (every rank on one GPU) can
 * launch fewer; the kernels stride over their rows by `tl.num_programs(0)`.
 */
export function commGrid(commSms: number, count: number): [GridDim] {
  return [{ kind: "num-sms", cap: Math.max(1, Math.min(commSms, count)) }];
}

/** The signal buffer: symmetric, zeroed once at allocation and never reset (monotone epochs). */
export function signalBuffer(slots: number, hostWritten: boolean): Buffer {
  return { name: SIGNAL_BUFFER, shape: [Math.max(1, slots)], dtype: hostWritten ? "uint32" : "int32", symmetric: true, init: "zeros" };
}

/**
 * A kernel entry of a manifest for a template: args given by name, checked against the
 * template's argument list (every argument, in order).
 */
export function kernelEntry(
  info: KernelTemplateInfo,
  k: Omit<Kernel, "args" | "entry" | "template" | "source" | "constexprs"> & {
    args: Readonly<Record<string, KernelArg>>;
    constexprs: Readonly<Record<string, number | boolean>>;
    params: Readonly<Record<string, number | string | boolean>>;
  },
): Kernel {
  const args = info.args.map((name) => {
    const value = k.args[name];
    if (value === undefined) throw new EmitError("bad-manifest", `kernel ${k.name}: argument ${name} of ${info.kind} has no value`);
    return { name, value };
  });
  const extra = Object.keys(k.args).filter((n) => !info.args.includes(n));
  if (extra.length > 0) throw new EmitError("bad-manifest", `kernel ${k.name}: ${info.kind} has no argument ${extra.join(", ")}`);
  for (const c of info.constexprs) {
    if (k.constexprs[c] === undefined) throw new EmitError("bad-manifest", `kernel ${k.name}: constexpr ${c} of ${info.kind} has no value`);
  }
  return {
    name: checkIdentifier(k.name, "kernel name"),
    source: `${k.name}.py`,
    entry: info.entry,
    stream: k.stream,
    grid: k.grid,
    numWarps: k.numWarps,
    numStages: k.numStages,
    args,
    constexprs: { ...k.constexprs },
    template: { kind: info.kind, params: { ...k.params } },
    ...(k.requires === undefined ? {} : { requires: [...k.requires] }),
  };
}

/**
 * How a reference states the row shards of M global rows over `world` ranks, cut as the
 * templates cut them (the balanced partition: the first `M mod world` ranks one row more):
 * `rowsPerRank` when the shards are equal, else `rowCounts`, rank by rank. Nothing when
 * M < world (no shard for some rank).
 */
export function rowShards(M: number, world: number): Pick<Reference, "rowsPerRank" | "rowCounts"> {
  if (M < world) return {};
  if (M % world === 0) return { rowsPerRank: M / world };
  return { rowCounts: partition(M, world).map((span) => span.size) };
}

/**
 * The reference of an AllGather+GEMM manifest: gathered `a` (the plan tensor) times the
 * buffer `gemm_b` into `gemm_c`, row-sharded as {@link rowShards} states.
 */
export function agGemmReference(
  a: string,
  problem: { M: number; N: number; K: number },
  world: number,
  tolerance: number,
  inputs: Readonly<Record<string, string>> = { B: "gemm_b" },
): Reference {
  const { M, N, K } = problem;
  return {
    operator: "ag-gemm",
    M,
    N,
    K,
    inputs: { A: a, ...inputs },
    output: "gemm_c",
    ...rowShards(M, world),
    tolerance,
  };
}

/** A `slot-wait` kernel with its table and source file (see {@link slotWaitStage}). */
export interface SlotWaitStage {
  readonly kernel: Kernel;
  readonly table: Table;
  readonly file: EmittedFile;
}

/**
 * The launch's last wait, on the device: a `slot-wait` kernel `name` on the compute stream (one
 * program) waiting, on each rank `r`, on every `[slot, arrivals]` of `waits[r]` (rows padded with
 * `[-1, 0]` to one length), so that what follows the launch on the rank's stream sees its whole
 * output, and a CUDA graph can capture it (a host stream's wait takes the host's epoch).
 */
export function slotWaitStage(name: string, waits: readonly (readonly number[])[][], dtype: ElementType): SlotWaitStage {
  const count = Math.max(1, ...waits.map((w) => w.length));
  const table: Table = {
    name: `${name}_slots`,
    dtype: "int64",
    values: waits.map((w) => [...w, ...Array.from({ length: count - w.length }, () => [-1, 0])].flat()),
  };
  const kernel = kernelEntry(SLOT_WAIT, {
    name,
    stream: "compute",
    grid: [1],
    numWarps: 1,
    numStages: 1,
    args: {
      sig_ptr: { kind: "buffer", name: SIGNAL_BUFFER },
      seg_ptr: { kind: "table", name: table.name },
      num_segments: { kind: "int", value: count },
      err_ptr: { kind: "error-buffer" },
      rank: { kind: "rank" },
      epoch_ptr: { kind: "epoch-word" },
      timeout_ns: { kind: "timeout-ns" },
    },
    constexprs: {},
    params: { segments: count },
  });
  return { kernel, table, file: { path: `${name}.py`, text: slotWaitSource({ dtype }) } };
}
