// The simulator's entry point: a plan, its tile schedule and a backend on a hardware model
// → per-rank predicted latency, the non-overlapped time, the perfect-overlap bound,
// TileLink's overlap ratio and a per-rank timeline.
import { type ChunkPlan, planSignals, type TileSchedule } from "@ovl/chunk-plan";
import type { HardwareModel } from "./hardware.js";
import { resolveHardware } from "./registry.js";
import { portGBps, reduceKernelGBps, SM_STORE_BYTES_PER_US, smCopyGBps, tileMs } from "./cost.js";
import { type CommBackend, type OpTiming, simulateComm } from "./comm.js";
import { networkSumReads, opEnds, reductionPass, reductionWork, settleComm } from "./reduction.js";
import { modelGpus } from "./network.js";
import { type ComputeTiming, regionDoneAt, simulateCompute } from "./compute.js";
import { SimulateError } from "./errors.js";
import { type RankSimulation, type SimulationResult, SIM_RESULT_SCHEMA, type TimelineEvent } from "./result.js";

/** Options of {@link simulate}. */
export interface SimulateOptions {
  /** A built-in model's name (`"H200_SXM"`, `"H100_SXM"`) or a `HardwareModel`. */
  readonly hardware: HardwareModel | string;
  /** How transfers are realised (default `copy-engine`). The plan is the same for every backend. */
  readonly backend?: CommBackend;
  /** SMs taken from compute to drive copies (backend `sm`; default 16 there, 0 otherwise). */
  readonly commSms?: number;
  /**
   * The compute kernel: `kind` picks its calibration, `"cublas"` (default: the model's
   * cuBLAS-class GEMM) or `"triton"` (the emitted Triton persistent TMA GEMM, from the
   * hardware model's `tritonGemm`); `efficiency` scales its speed further (default 1).
   */
  readonly computeKernel?: {
    readonly kind?: "cublas" | "triton";
    readonly efficiency?: number;
    /** `"stream-k"`: the body cuts its last, partial wave into pieces along K (`streamKSplit`); default whole tiles. */
    readonly tail?: "wave" | "stream-k";
  };
  /**
   * The reduction kernel's persistent grid (default: the hardware model's
   * `reduceKernel.programs`); more programs keep more loads in flight, up to the kernel's peak.
   * `concurrent`: the reduction runs beside the compute kernel from its start (on
   * communication SMs, as the tile-wise AllReduce's `ar-tile-reduce` does) instead of after
   * it on its stream; each region is still reduced once every transfer into it has landed.
   */
  readonly reduceKernel?: { readonly programs?: number; readonly concurrent?: boolean };
  /**
   * Backend `sm`: the transfers that do not reduce (an AllGather half) run, once the rank's GEMM has
   * finished, on every SM (`smCopyGBps` of the model's SM count, at most NVLink) instead of on the `commSms` push SMs
   * (GEMM+AllReduce over SM transfers, whose reduction stores each summed tile into every peer's output).
   */
  readonly broadcastAfterCompute?: boolean;
  /**
   * A producer's own partial rows: `"in-place"` (default: the reduction after the GEMM reads them from
   * its output, as emitted since 2026-11-27, so the plan's local copy of them moves nothing) or
   * `"copied"` (the plan's local copy runs, as in kernels emitted before).
   */
  readonly ownPartial?: "in-place" | "copied";
  /**
   * When a persistent producer notifies a tile: `"tile"` (default: at the tile's end, as the
   * `gemm-producer` template does) or `"next-tile"` (a tile program's `notifyAt: "next-tile"`, as
   * GEMM+RS and GEMM+AR compile their producer bodies: one K step into its program's next tile, the
   * last tile when the program ends).
   */
  readonly notifyAt?: "tile" | "next-tile";
  /**
   * Copy-engine launch pipelining (default true): the host enqueues a stream's copies ahead,
   * so each copy's start latency overlaps its predecessor's transfer; false charges every
   * copy its full launch.
   */
  readonly pipelinedLaunch?: boolean;
  /** Timeline granularity on the compute lane: one event per wave (default) or per tile. */
  readonly detail?: "waves" | "tiles";
}

/**
 * How GEMM+AllReduce's two forms run, as simulation options: the tile-wise AllReduce reduces on its
 * `reducePrograms` communication SMs while the GEMM runs; the partitioned one over SM transfers stores its
 * AllGather half (the reduction's stores into every peer's output) from every SM once the GEMM is over; over
 * the copy engine the partitioned form is the plain plan. The one statement of that rule for every caller
 * (`ovl simulate`, the tuner's cost).
 */
export function allReduceOptions(
  form: "tilewise" | "partitioned",
  backend: CommBackend,
  reducePrograms: number,
): Pick<SimulateOptions, "reduceKernel" | "broadcastAfterCompute"> {
  if (form === "tilewise") return { reduceKernel: { programs: reducePrograms, concurrent: true } };
  return backend === "sm" ? { broadcastAfterCompute: true } : {};
}

/**
 * Predict an overlapped operator: the plan's communication and the schedule's compute,
 * simulated together on every rank. A consumer schedule (AllGather + GEMM) waits per tile
 * on chunk slots; a producer schedule (GEMM + ReduceScatter) releases ops that depend on
 * compute. Accumulating transfers (either backend) land as partials that a reduction
 * kernel sums after the compute kernel, region by region as they arrive, at a bandwidth set
 * by the loads its programs keep in flight. Throws {@link SimulateError} on inputs it cannot price.
 */
export function simulate(plan: ChunkPlan, schedule: TileSchedule, options: SimulateOptions): SimulationResult {
  const hw = resolveHardware(options.hardware);
  const backend = options.backend ?? "copy-engine";
  if (backend !== "copy-engine" && backend !== "sm") {
    throw new SimulateError("bad-option", `backend "${String(backend)}": use "copy-engine" or "sm"`);
  }
  const commSms = options.commSms ?? (backend === "sm" ? 16 : 0);
  if (!Number.isInteger(commSms) || commSms < 0 || commSms >= hw.smCount || (backend === "sm" && commSms === 0)) {
    throw new SimulateError(
      "bad-option",
      `commSms = ${commSms}: give an integer in ${backend === "sm" ? 1 : 0}..${hw.smCount - 1} (SMs left for compute must be at least 1)`,
    );
  }
  const efficiency = options.computeKernel?.efficiency ?? 1;
  if (!(efficiency > 0 && efficiency <= 2)) {
    throw new SimulateError(
      "bad-option",
      `computeKernel.efficiency = ${efficiency}: give a positive factor (1 = cuBLAS-class, 0.8 = 20% slower)`,
    );
  }
  if (schedule.plan !== plan.name || schedule.ranks.length !== plan.ranks.length) {
    throw new SimulateError(
      "schedule-mismatch",
      `tile schedule of plan "${schedule.plan}" (${schedule.ranks.length} ranks) does not belong to plan "${plan.name}" (${plan.ranks.length} ranks): lower this plan with lowerToTileSchedule`,
    );
  }
  const kind = options.computeKernel?.kind ?? "cublas";
  if (kind !== "cublas" && kind !== "triton") {
    throw new SimulateError("bad-option", `computeKernel.kind "${String(kind)}": use "cublas" or "triton"`);
  }
  if (kind === "triton" && hw.tritonGemm === undefined) {
    throw new SimulateError(
      "bad-option",
      `computeKernel.kind "triton": hardware model ${hw.name} has no tritonGemm calibration; add one or use "cublas"`,
    );
  }
  const tail = options.computeKernel?.tail ?? "wave";
  if (tail !== "wave" && tail !== "stream-k") {
    throw new SimulateError("bad-option", `computeKernel.tail "${String(tail)}": use "wave" or "stream-k"`);
  }
  const kernel = kind === "triton" ? hw.tritonGemm! : { efficiency: 1, launchUs: hw.gemm.launchUs };
  const reducePrograms = options.reduceKernel?.programs ?? hw.reduceKernel?.programs;
  if (reducePrograms !== undefined && !(Number.isInteger(reducePrograms) && reducePrograms > 0)) {
    throw new SimulateError(
      "bad-option",
      `reduceKernel.programs = ${reducePrograms}: give a positive integer (the reduction kernel's persistent grid)`,
    );
  }
  if (plan.ranks.length > modelGpus(hw)) {
    throw new SimulateError(
      "bad-hardware",
      `plan "${plan.name}" has ${plan.ranks.length} ranks; hardware model ${hw.name} has ${modelGpus(hw)} GPUs (nodes × gpusPerNode): use a larger model (multiNode)`,
    );
  }
  const signalled = plan.signals === undefined ? planSignals(plan) : plan;
  const tMs = tileMs(
    hw,
    schedule.tiling.tile,
    schedule.tiling.problem.K,
    efficiency * kernel.efficiency * (kind === "triton" ? tritonTileFactor(hw, schedule.tiling.tile) : 1),
  );
  const startMs = kernel.launchUs * 1e-3;
  const computeSms = hw.smCount - (backend === "sm" ? commSms : 0);
  const broadcast = backend === "sm" && options.broadcastAfterCompute === true;
  const comm = {
    plan: signalled,
    hardware: hw,
    backend,
    commSms,
    pipelinedLaunch: options.pipelinedLaunch ?? true,
    // A producer's own partial rows are reduced in place from its output (no local copy runs).
    ...(schedule.role === "producer" && options.ownPartial !== "copied" ? { readInPlace: schedule.tiling.tensor } : {}),
    ...(broadcast ? { afterComputeGBps: Math.min(smCopyGBps(hw, hw.smCount), portGBps(hw)) } : {}),
  };
  const notifyAt = options.notifyAt ?? "tile";
  if (notifyAt !== "tile" && notifyAt !== "next-tile") {
    throw new SimulateError("bad-option", `notifyAt "${String(notifyAt)}": use "tile" or "next-tile"`);
  }
  const { tile } = schedule.tiling;
  const streamK = tail === "stream-k" ? { partialMs: (tile.BM * tile.BN * 4) / SM_STORE_BYTES_PER_US / 1e3 } : undefined;
  const computeOf = (rank: number, sms: number, slotReady: (slot: number) => number, busy: Busy, slowdown: number): ComputeTiming =>
    simulateCompute({ schedule, rank: schedule.ranks[rank]!, tileMs: tMs, startMs, sms, slotReady, busy, slowdown, streamK, notifyAt });
  const ranks = plan.ranks.map((r) => r.rank);
  const idle: Busy = [];
  const alone = ranks.map((r) => computeOf(r, hw.smCount, () => 0, idle, 0));
  // Network transfers that send a sum wait for the reduction kernel to write it (`settleComm`).
  const work = reductionWork(signalled);
  const reduceGBps = reduceKernelGBps(hw, reducePrograms);
  const reduceLaunchMs = (hw.reduceKernel?.launchUs ?? hw.gemm.launchUs) * 1e-3;
  const waits = networkSumReads(signalled, hw, work);
  const concurrent = options.reduceKernel?.concurrent === true;
  const settle = (reduceStart: (rank: number) => number) => ({ work, waits, reduceStart, launchMs: reduceLaunchMs, gbps: reduceGBps });
  const commAloneOps = settleComm(
    { ...comm, computeDone: () => 0 },
    settle(() => 0),
  );

  let ops: OpTiming[];
  let compute: ComputeTiming[];
  if (schedule.role === "consumer") {
    // The consumer kernel runs until its last chunk has arrived, beside every copy.
    ops = simulateComm({ ...comm, computeDone: () => 0, computeUntil: ranks.map(() => Infinity) });
    const ready = slotReadiness(signalled, ops);
    compute = ranks.map((r) => computeOf(r, computeSms, (s) => readyOf(ready, r, s), busyOf(ops, r), hw.contention.copySlowdown));
  } else {
    // Compute gates communication; a second pass prices the copies' contention on compute.
    compute = ranks.map((r) => computeOf(r, computeSms, () => 0, idle, 0));
    const first = compute;
    ops = settleComm(
      { ...comm, computeDone: (r, region) => regionDoneAt(schedule, first[r]!, region), computeUntil: first.map((c) => c.computeEnd) },
      settle((r) => (concurrent ? startMs : first[r]!.computeEnd)),
    );
    compute = ranks.map((r) => computeOf(r, computeSms, () => 0, busyOf(ops, r), hw.contention.copySlowdown));
    const final = compute;
    ops = settleComm(
      { ...comm, computeDone: (r, region) => regionDoneAt(schedule, final[r]!, region), computeUntil: final.map((c) => c.computeEnd) },
      settle((r) => (concurrent ? startMs : final[r]!.computeEnd)),
    );
  }
  const overlappedEnds = opEnds(ops);
  const aloneEnds = opEnds(commAloneOps);

  const perRank: RankSimulation[] = ranks.map((r) => {
    const mine = ops.filter((o) => o.rank === r);
    const commEnd = Math.max(0, ...mine.map((o) => o.end));
    const computeEnd = compute[r]!.computeEnd;
    // The reduction kernel follows the compute kernel on its stream, or runs beside it.
    const reduceStart = concurrent ? startMs : computeEnd;
    const reduce = reductionPass(work[r] ?? [], reduceStart, reduceLaunchMs, reduceGBps, overlappedEnds);
    const latencyMs = Math.max(computeEnd, commEnd, reduce?.end ?? 0);
    const computeAloneMs = alone[r]!.computeEnd;
    const reduceAlone = reductionPass(work[r] ?? [], 0, reduceLaunchMs, reduceGBps, aloneEnds);
    const commAloneMs = Math.max(0, ...commAloneOps.filter((o) => o.rank === r).map((o) => o.end), reduceAlone?.end ?? 0);
    return {
      rank: r,
      latencyMs,
      computeAloneMs,
      commAloneMs,
      nonOverlappedMs: computeAloneMs + commAloneMs,
      boundMs: Math.max(computeAloneMs, commAloneMs),
      overlapRatio: overlapRatio(computeAloneMs, commAloneMs, latencyMs),
      stallMs: compute[r]!.stallMs,
      events: timeline(compute[r]!, mine, schedule, r, reduce === null ? null : [reduce.start, reduce.end], options.detail ?? "waves"),
    };
  });
  const latencyMs = Math.max(...perRank.map((r) => r.latencyMs));
  const computeAloneMs = Math.max(...perRank.map((r) => r.computeAloneMs));
  const commAloneMs = Math.max(...perRank.map((r) => r.commAloneMs));
  return {
    $schema: SIM_RESULT_SCHEMA,
    plan: plan.name,
    role: schedule.role,
    hardware: hw.name,
    backend,
    commSms,
    world: ranks.length,
    latencyMs,
    computeAloneMs,
    commAloneMs,
    nonOverlappedMs: computeAloneMs + commAloneMs,
    boundMs: Math.max(computeAloneMs, commAloneMs),
    overlapRatio: overlapRatio(computeAloneMs, commAloneMs, latencyMs),
    speedup: (computeAloneMs + commAloneMs) / latencyMs,
    ranks: perRank,
  };
}

/** TileLink §7: `(comp_only + comm_only − overlapped) / comm_only`, the fraction of communication hidden. */
export function overlapRatio(computeAloneMs: number, commAloneMs: number, overlappedMs: number): number {
  return commAloneMs > 0 ? (computeAloneMs + commAloneMs - overlappedMs) / commAloneMs : 1;
}

type Busy = readonly (readonly [number, number])[];

/** Per rank and slot, when the slot reaches its arrivals. */
function slotReadiness(plan: ChunkPlan, ops: readonly OpTiming[]): Map<string, number> {
  const hits = new Map<string, number[]>();
  for (const o of ops) {
    const ref = plan.signals?.notify[o.rank]?.[o.stream]?.[o.index];
    if (ref == null) continue;
    const key = `${ref.rank}:${ref.slot}`;
    const list = hits.get(key) ?? [];
    list.push(o.end);
    hits.set(key, list);
  }
  const ready = new Map<string, number>();
  for (const { rank, slots } of plan.signals?.slots ?? []) {
    for (const s of slots) {
      const times = (hits.get(`${rank}:${s.slot}`) ?? []).sort((a, b) => a - b);
      const t = times[s.arrivals - 1];
      if (t !== undefined) ready.set(`${rank}:${s.slot}`, t);
    }
  }
  return ready;
}

function readyOf(ready: Map<string, number>, rank: number, slot: number): number {
  const t = ready.get(`${rank}:${slot}`);
  if (t === undefined) {
    throw new SimulateError(
      "unknown-slot",
      `rank ${rank} waits on slot ${slot}, which no op of the plan fills enough times: re-run planSignals and lowerToTileSchedule on the same plan`,
    );
  }
  return t;
}

/** Intervals during which copies move data out of or into `rank`, merged and sorted. */
function busyOf(ops: readonly OpTiming[], rank: number): Busy {
  const spans = ops
    .filter((o) => o.dataEnd > o.dataStart && (o.rank === rank || o.src === rank || o.dst === rank))
    .map((o) => [o.dataStart, o.dataEnd] as const)
    .sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [a, b] of spans) {
    const last = merged[merged.length - 1];
    if (last !== undefined && a <= last[1]) last[1] = Math.max(last[1], b);
    else merged.push([a, b]);
  }
  return merged;
}

function timeline(
  compute: ComputeTiming,
  ops: readonly OpTiming[],
  schedule: TileSchedule,
  rank: number,
  reduce: readonly [number, number] | null,
  detail: "waves" | "tiles",
): TimelineEvent[] {
  const events: TimelineEvent[] = [];
  if (detail === "tiles") {
    const tables = schedule.ranks[rank]!.tables;
    for (let v = 0; v < compute.start.length; v++) {
      events.push({
        lane: "compute",
        kind: "tile",
        startMs: compute.start[v]!,
        endMs: compute.end[v]!,
        label: `tile ${tables.tile[v]!} (wave ${tables.wave[v]!})`,
      });
    }
  } else {
    for (const w of compute.waves) {
      events.push({ lane: "compute", kind: "wave", startMs: w.start, endMs: w.end, label: `wave ${w.wave} (${w.tiles} tiles)` });
    }
  }
  for (const w of compute.waves) {
    if (w.readyAt > w.freeAt + 1e-9) {
      events.push({ lane: "waits", kind: "wait", startMs: w.freeAt, endMs: w.readyAt, label: `wave ${w.wave} waits for its chunk` });
    }
  }
  if (reduce !== null) events.push({ lane: "compute", kind: "reduce", startMs: reduce[0], endMs: reduce[1], label: "reduction pass" });
  for (const o of ops) {
    const lane = `stream ${o.stream}`;
    if (o.dataStart > o.start) events.push({ lane, kind: "launch", startMs: o.start, endMs: o.dataStart, label: `launch ${o.label}` });
    events.push({
      lane,
      kind: o.kind === "collective" ? "collective" : "transfer",
      startMs: o.dataStart,
      endMs: o.dataEnd,
      label: `${o.label} (${(o.bytes / 2 ** 20).toFixed(1)} MiB)`,
    });
    if (o.end > o.dataEnd) events.push({ lane, kind: "signal", startMs: o.dataEnd, endMs: o.end, label: "signal" });
  }
  return events;
}

/** The Triton kernel's speed factor for `tile` relative to the model's calibrated tile: the `tritonGemm.tiles` entry, else 1. */
export function tritonTileFactor(hw: HardwareModel, tile: { readonly BM: number; readonly BN: number; readonly BK: number }): number {
  return hw.tritonGemm?.tiles?.find((t) => t.BM === tile.BM && t.BN === tile.BN && t.BK === tile.BK)?.efficiency ?? 1;
}
