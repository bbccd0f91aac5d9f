// The shared data rates of the communication simulation: at every event, each moving transfer
// gets an equal share of every resource it crosses (its engine or copy SMs, the NVLink ports
// of its two ranks, or, between nodes, the NICs of its two ranks), the minimum of those shares.
import type { Op } from "@ovl/chunk-plan";
import type { CommBackend } from "./comm.js";

/** What the rates read of an op in flight. */
export interface MovingOp {
  readonly t: { readonly rank: number; readonly op: Op; readonly bytes: number };
  readonly src: number;
  readonly dst: number;
  /** A transfer between two ranks. */
  readonly linked: boolean;
  /** A transfer between nodes (over NICs). */
  readonly network: boolean;
  readonly srcNic: number;
  readonly dstNic: number;
  /** Moves at a shared rate (not in a fixed time). */
  readonly shared: boolean;
  readonly phase: string;
}

/** The capacities the rates divide, in bytes per ms. */
export interface RateCaps<T extends MovingOp> {
  /** NVLink per direction of one GPU. */
  readonly port: number;
  /** One NIC per direction (0 on a single-node model, which has no network transfers). */
  readonly nic: number;
  /** A copy-engine transfer's cap (lower beside a GEMM). */
  readonly engine: (st: T) => number;
  /** A transfer's SM pool (backend `sm`) and its capacity. */
  readonly smPool: (st: T) => { key: string; bytesPerMs: number };
  readonly hbm: number;
  readonly backend: CommBackend;
}

/**
 * Bytes per ms of every shared-rate op now moving. A transfer inside a node: its engine's cap
 * (lower beside a GEMM) or, with SM copies, an equal share of the initiating rank's copy SMs;
 * and an equal share of its source's NVLink egress and its destination's ingress. A transfer
 * between nodes: an equal share of its source NIC's egress and its destination NIC's ingress
 * (the NIC's RDMA engine moves it: no copy engine, no copy SMs, no NVLink). A local copy on copy
 * SMs: its share of those SMs, at most an HBM pass (read + write, or read ×2 + write when it
 * accumulates).
 */
export function dataRates<T extends MovingOp>(active: readonly T[], caps: RateCaps<T>): Map<T, number> {
  const out = new Map<number, number>();
  const inn = new Map<number, number>();
  const nicOut = new Map<number, number>();
  const nicIn = new Map<number, number>();
  const byPool = new Map<string, number>();
  const moving = active.filter((st) => st.phase === "data" && st.shared);
  const pools = new Map(moving.filter((st) => !st.network).map((st) => [st, caps.smPool(st)] as const));
  for (const st of moving) {
    if (st.network) {
      nicOut.set(st.srcNic, (nicOut.get(st.srcNic) ?? 0) + 1);
      nicIn.set(st.dstNic, (nicIn.get(st.dstNic) ?? 0) + 1);
      continue;
    }
    if (st.linked) {
      out.set(st.src, (out.get(st.src) ?? 0) + 1);
      inn.set(st.dst, (inn.get(st.dst) ?? 0) + 1);
    }
    const { key } = pools.get(st)!;
    byPool.set(key, (byPool.get(key) ?? 0) + 1);
  }
  const rates = new Map<T, number>();
  for (const st of moving) {
    if (st.network) {
      rates.set(st, Math.min(caps.nic / nicOut.get(st.srcNic)!, caps.nic / nicIn.get(st.dstNic)!));
      continue;
    }
    const pool = pools.get(st)!;
    const cap = caps.backend === "copy-engine" ? caps.engine(st) : pool.bytesPerMs / byPool.get(pool.key)!;
    if (st.linked) rates.set(st, Math.min(cap, caps.port / out.get(st.src)!, caps.port / inn.get(st.dst)!));
    else rates.set(st, Math.min(cap, caps.hbm / (st.t.op.reduce === undefined ? 2 : 3)));
  }
  return rates;
}
