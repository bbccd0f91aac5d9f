// Discrete-event simulation of a chunk plan's communication on every rank at once: each
// op passes launch → data → signal on its stream; concurrent transfers share the NVLink
// ports of their source and destination and, with SM copies, the rank's copy SMs (which
// then also drive its local copies); transfers between nodes share the two ranks' NICs.
import { type ChunkPlan, type Op, type Region, regionBytes, type TensorDecl } from "@ovl/chunk-plan";
import type { HardwareModel } from "./hardware.js";
import { copyLaunchMs, hbmPassMs, portGBps, smCopyGBps, streamWriteMs } from "./cost.js";
import { fabricCollectiveMs } from "./collective-fabric.js";
import { SimulateError } from "./errors.js";
import { crossesNodes, nicOf, ranksPerNode } from "./network.js";
import { dataRates, type MovingOp } from "./rates.js";

/** How transfers are realised (AutoOverlap Fig. 7): host-launched copy engine, or load/store on dedicated SMs. */
export type CommBackend = "copy-engine" | "sm";

/** One op's simulated phases (ms): queued until `start`, moving data `dataStart..dataEnd`, done at `end` (signal written). */
export interface OpTiming {
  readonly rank: number;
  readonly stream: number;
  readonly index: number;
  readonly kind: Op["kind"];
  readonly label: string;
  readonly bytes: number;
  /** The rank data is read from and the rank it lands on (equal for local copies and collectives). */
  readonly src: number;
  readonly dst: number;
  readonly start: number;
  readonly dataStart: number;
  readonly dataEnd: number;
  readonly end: number;
}

/** What the communication simulation needs besides the plan. */
export interface CommSimInput {
  readonly plan: ChunkPlan;
  readonly hardware: HardwareModel;
  readonly backend: CommBackend;
  /** SMs driving copies per rank (backend `sm`). */
  readonly commSms: number;
  /** When the compute tiles writing `region` on `rank` are done (ms); 0 when communication runs alone. */
  readonly computeDone: (rank: number, region: Region) => number;
  /**
   * Per rank, until when its GEMM runs beside the copies (ms; absent = no GEMM, as in the
   * communication-alone run). A copy-engine transfer whose source or destination is still
   * computing reaches `contention.copyBandwidthUnderCompute` of its bandwidth.
   */
  readonly computeUntil?: readonly number[];
  /** Whether a stream's copy launches overlap its predecessor's transfer (default true). */
  readonly pipelinedLaunch?: boolean;
  /**
   * Backend `sm`, with `computeUntil`: what a rank sends with every SM once its GEMM has finished
   * (GB/s), shared by its transfers that do not reduce (the AllGather half a reduction kernel
   * stores itself); absent, every transfer shares the `commSms` pool.
   */
  readonly afterComputeGBps?: number;
  /**
   * A tensor whose local copies move nothing: the kernel after the GEMM reads it in place (GEMM+RS and
   * the partitioned GEMM+AllReduce reduce a rank's own partial from the GEMM's output). Such a copy
   * still orders what depends on it.
   */
  readonly readInPlace?: string;
  /**
   * When an op may start besides its dependencies (ms; absent: no further condition). The
   * simulator uses it for a network transfer that reads a sum its source rank is still reducing.
   */
  readonly readyAfter?: (rank: number, stream: number, index: number) => number;
}

interface OpState extends MovingOp {
  readonly t: { rank: number; stream: number; index: number; op: Op; bytes: number; label: string };
  readonly src: number;
  readonly dst: number;
  /** A transfer between two ranks: shares NVLink ports, or, between nodes, NICs. */
  readonly linked: boolean;
  /** A transfer between nodes: over the NICs of `src` and `dst` (`srcNic`, `dstNic`), not NVLink, copy engines or copy SMs. */
  readonly network: boolean;
  readonly srcNic: number;
  readonly dstNic: number;
  /** Its data moves at a shared rate (peer transfers; local copies driven by copy SMs), not in a fixed time. */
  readonly shared: boolean;
  phase: "wait" | "launch" | "data" | "signal" | "done";
  start: number;
  dataStart: number;
  dataEnd: number;
  phaseEnd: number;
  remaining: number;
  end: number;
  /** When the op's compute dependencies are met (computed once). */
  computeReady: number | null;
  /** When every dependency other than stream order is met (set by `readyAt`). */
  depsAt: number;
}

const EPS = 1e-9;

/** Simulate every op of the plan; returns their timings in (rank, stream, index) order. */
export function simulateComm(input: CommSimInput): OpTiming[] {
  const { plan, hardware: hw, backend } = input;
  const world = plan.ranks.length;
  const decls = new Map<string, TensorDecl>(plan.tensors.map((t) => [t.name, t]));
  const streams: OpState[][][] = plan.ranks.map((rp) =>
    rp.streams.map((ops, s) =>
      ops.map((op, i) => initState(rp.rank, s, i, op, decls, backend, op.kind === "local-copy" && op.src.tensor === input.readInPlace, hw)),
    ),
  );
  const notify = plan.signals?.notify;
  // Host-side costs grow with the processes sharing one host: the plan's ranks on one node.
  const hostRanks = ranksPerNode(hw, world);
  const netLatency = (hw.topology?.network.latencyUs ?? 0) * 1e-3;
  const signalCost = (r: number, s: number, i: number): number =>
    notify !== undefined && notify[r]?.[s]?.[i] == null
      ? 0
      : backend === "copy-engine"
        ? streamWriteMs(hw, hostRanks)
        : hw.signal.deviceNotifyUs * 1e-3;
  // A transfer between nodes also pays one network message latency before its first byte lands.
  const launchCost = (st: OpState): number =>
    (st.t.op.kind === "collective" ? 0 : backend === "copy-engine" ? copyLaunchMs(hw, hostRanks) : 0) + (st.network ? netLatency : 0);
  // Copy engines move data inside a node only; the NIC's RDMA engine moves it between nodes.
  const usesEngine = (st: OpState): boolean => backend === "copy-engine" && st.t.op.kind !== "collective" && !st.network;
  const nic = (hw.topology?.network.nicGBps ?? 0) * 1e6;
  const firstStart = backend === "sm" ? hw.smCopy.launchUs * 1e-3 : 0;
  const port = portGBps(hw) * 1e6; // bytes per ms
  const engine = hw.copyEngine.bandwidthGBps * 1e6;
  const underCompute = hw.contention.copyBandwidthUnderCompute ?? 1;
  const until = input.computeUntil ?? [];
  const engineCap = (st: OpState): number =>
    (until[st.src] ?? 0) > now + EPS || (until[st.dst] ?? 0) > now + EPS ? engine * underCompute : engine;
  const smPool = smCopyGBps(hw, input.commSms) * 1e6;
  const broadcast = input.afterComputeGBps === undefined || input.computeUntil === undefined ? undefined : input.afterComputeGBps * 1e6;
  // A transfer's SM pool: the push SMs, or, for one that does not reduce once its rank's GEMM is over, every SM.
  const smPoolOf = (st: OpState): { key: string; bytesPerMs: number } =>
    broadcast !== undefined && st.t.op.reduce === undefined && !((until[st.t.rank] ?? 0) > now + EPS)
      ? { key: `${st.t.rank}:all`, bytesPerMs: broadcast }
      : { key: `${st.t.rank}:push`, bytesPerMs: smPool };
  const hbm = hw.hbmGBps * 1e6;
  const heads = streams.map((r) => r.map(() => 0));
  const streamFree = streams.map((r) => r.map(() => firstStart));
  // The host enqueues a stream's copies ahead of the GPU, so a copy's start latency runs
  // while its predecessor's data moves: from that predecessor's data start, or from when
  // its own dependencies are met if later. Only a stream's first copy pays it in full.
  const pipelined = input.pipelinedLaunch ?? true;
  const enqueuedFrom: (number | null)[][] = streams.map((r) => r.map(() => null));
  const engines = streams.map(() => 0);
  const active: OpState[] = [];
  let now = 0;
  let remainingOps = streams.flat(2).length;

  const readyAt = (st: OpState): number | null => {
    st.computeReady ??= Math.max(
      input.readyAfter?.(st.t.rank, st.t.stream, st.t.index) ?? 0,
      ...st.t.op.deps.map((d) => (d.kind === "compute" ? input.computeDone(d.rank, d.region) : 0)),
    );
    let deps = st.computeReady;
    for (const dep of st.t.op.deps) {
      if (dep.kind === "compute") continue;
      const other = streams[dep.rank]?.[dep.stream]?.[dep.index];
      if (other === undefined) {
        throw new SimulateError(
          "unresolved-dependency",
          `rank ${st.t.rank} stream ${st.t.stream} op ${st.t.index} depends on missing op (${dep.rank}, ${dep.stream}, ${dep.index}): validate the plan first`,
        );
      }
      if (other.phase !== "done") return null;
      deps = Math.max(deps, other.end);
    }
    st.depsAt = deps;
    return Math.max(streamFree[st.t.rank]![st.t.stream]!, deps);
  };

  while (remainingOps > 0) {
    // Start every stream head whose inputs are known and due; remember the next due time.
    let nextDue = Infinity;
    for (let r = 0; r < streams.length; r++) {
      for (let s = 0; s < streams[r]!.length; s++) {
        const st = streams[r]![s]![heads[r]![s]!];
        if (st === undefined || st.phase !== "wait") continue;
        const due = readyAt(st);
        if (due === null) continue;
        const engine = usesEngine(st);
        if (due > now + EPS) nextDue = Math.min(nextDue, due);
        else if (!engine || engines[r]! < hw.copyEngine.count) {
          if (engine) engines[r]!++;
          st.start = now;
          st.phase = "launch";
          // The host enqueues every copy of a stream ahead, a network transfer's too (its proxy posts it).
          const piped = backend === "copy-engine" && st.t.op.kind !== "collective";
          const from = piped ? Math.max(st.depsAt, enqueuedFrom[r]![s] ?? now) : now;
          st.phaseEnd = Math.max(now, from + launchCost(st));
          active.push(st);
        }
      }
    }
    // Advance to the next phase change.
    const rates = dataRates(active, { port, nic, engine: engineCap, smPool: smPoolOf, hbm, backend });
    let next = nextDue;
    // A kernel's end changes the copy-engine rate of transfers touching its rank.
    for (const u of until) if (u > now + EPS && u < next && active.length > 0) next = u;
    for (const st of active) {
      if (st.phase === "data" && st.shared) next = Math.min(next, now + st.remaining / rates.get(st)!);
      else next = Math.min(next, st.phaseEnd);
    }
    if (!Number.isFinite(next)) {
      throw new SimulateError(
        "unresolved-dependency",
        `communication stalls at ${now.toFixed(4)} ms with ${remainingOps} ops left: the plan's dependencies form a cycle or wait on ops that never run (run validatePlan)`,
      );
    }
    const dt = Math.max(0, next - now);
    now = next;
    for (let k = active.length - 1; k >= 0; k--) {
      const st = active[k]!;
      if (st.phase === "data" && st.shared) st.remaining -= rates.get(st)! * dt;
      const finished = st.phase === "data" && st.shared ? st.remaining <= EPS * Math.max(1, st.t.bytes) : st.phaseEnd <= now + EPS;
      if (!finished) continue;
      if (st.phase === "launch") {
        st.phase = "data";
        st.dataStart = now;
        st.phaseEnd = now + fixedDataMs(st, hw, world);
        enqueuedFrom[st.t.rank]![st.t.stream] = pipelined && backend === "copy-engine" && st.t.op.kind !== "collective" ? now : null;
      } else if (st.phase === "data") {
        st.phase = "signal";
        st.dataEnd = now;
        if (usesEngine(st)) engines[st.t.rank]!--;
        st.phaseEnd = now + signalCost(st.t.rank, st.t.stream, st.t.index);
      } else if (st.phase === "signal") {
        st.phase = "done";
        st.end = now;
        active.splice(k, 1);
        streamFree[st.t.rank]![st.t.stream] = now;
        heads[st.t.rank]![st.t.stream]!++;
        remainingOps--;
      }
    }
  }
  return streams.flat(2).map((st) => ({
    rank: st.t.rank,
    stream: st.t.stream,
    index: st.t.index,
    kind: st.t.op.kind,
    label: st.t.label,
    bytes: st.t.bytes,
    src: st.src,
    dst: st.dst,
    start: st.start,
    dataStart: st.dataStart,
    dataEnd: st.dataEnd,
    end: st.end,
  }));
}

function initState(
  rank: number,
  stream: number,
  index: number,
  op: Op,
  decls: Map<string, TensorDecl>,
  backend: CommBackend,
  inPlace: boolean,
  hw: HardwareModel,
): OpState {
  const moved = op.kind === "collective" && op.collective === "reduce-scatter" ? op.src : op.dst;
  const decl = decls.get(moved.tensor);
  if (decl === undefined) {
    throw new SimulateError("schedule-mismatch", `rank ${rank} stream ${stream} op ${index} moves unknown tensor "${moved.tensor}"`);
  }
  const bytes = inPlace ? 0 : regionBytes(moved, decl);
  const src = op.kind === "p2p" ? (op.side === "push" ? rank : op.peer) : rank;
  const dst = op.kind === "p2p" ? (op.side === "push" ? op.peer : rank) : rank;
  const label = op.label ?? (op.kind === "p2p" ? `${op.side} ${src}→${dst}` : op.kind === "collective" ? op.collective : "local copy");
  const linked = op.kind === "p2p" && src !== dst;
  const network = linked && crossesNodes(hw, src, dst);
  return {
    t: { rank, stream, index, op, bytes, label },
    src,
    dst,
    linked,
    network,
    srcNic: nicOf(hw, src),
    dstNic: nicOf(hw, dst),
    // With SM copies a local copy is load/store on the same copy SMs as the peer transfers.
    shared: !inPlace && (linked || (backend === "sm" && op.kind !== "collective")),
    phase: "wait",
    start: 0,
    dataStart: 0,
    dataEnd: 0,
    phaseEnd: 0,
    remaining: bytes,
    end: 0,
    computeReady: null,
    depsAt: 0,
  };
}

/** Data time of ops that move at no shared rate: copy-engine local copies through HBM, collectives by the NCCL-like model. */
function fixedDataMs(st: OpState, hw: HardwareModel, world: number): number {
  const op = st.t.op;
  if (st.shared) return 0;
  if (op.kind === "collective") {
    // `bytes` is the gathered output (all-gather) or the full input (reduce-scatter), as the model expects;
    // a collective whose ranks span nodes is priced on the two-level fabric.
    return fabricCollectiveMs(hw, op.collective, st.t.bytes, op.ranks.length > 0 ? op.ranks : Array.from({ length: world }, (_, r) => r));
  }
  return hbmPassMs(hw, st.t.bytes * (op.reduce ? 2 : 1), st.t.bytes);
}
