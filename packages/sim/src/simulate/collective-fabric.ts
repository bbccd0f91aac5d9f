// The NCCL-like collective on a two-level fabric (the non-overlapped baseline across nodes):
// inside one node the measured fit (`collectiveMs`); across nodes the faster of a ring through
// every rank and the hierarchical two-phase algorithm (NVLink phase + per-rail network phase).
import type { CollectiveKind } from "@ovl/chunk-plan";
import { collectiveMs } from "./cost.js";
import type { HardwareModel } from "./hardware.js";
import { nodeOf } from "./network.js";

/** How the fabric collective runs and what each algorithm would take (ms). */
export interface FabricCollective {
  readonly ms: number;
  /** `nvlink`: one node (the measured fit); `ring` or `hierarchical`: the faster across nodes. */
  readonly algorithm: "nvlink" | "ring" | "hierarchical";
  readonly ringMs?: number;
  readonly hierarchicalMs?: number;
}

const US = 1e-3;

/**
 * An NCCL-like `kind` over `ranks` on `tensor bytes` (the gathered output of an all-gather, the
 * input of a reduce-scatter, the buffer of an all-reduce / all-to-all), on `hw`'s fabric. With
 * `N` nodes spanned, `G` ranks on the fullest node, `W` ranks, `B` bytes, `nic` a rank's share
 * of its NIC (`nicGBps · nicsPerNode / gpusPerNode · collectiveEfficiency`):
 * - one node: `collectiveMs(hw, kind, B, W)`, the measured fit;
 * - ring (one ring per NIC rail, each crossing the network on its own NIC, so a node's NICs
 *   together carry every ring): `latencyUs + (W − 1) · network.latencyUs + traffic /
 *   min(collective.busGBps, G · nic)`, traffic `(W − 1)/W · B` (twice for all-reduce);
 * - hierarchical, all-gather: the network phase among the `N` ranks of one rail (each receives
 *   `(N − 1) · B/W` over its NIC) then an intra-node all-gather of `B` over `G` ranks;
 *   reduce-scatter: the intra-node reduce-scatter of `B`, then the rail phase on `B/G`;
 *   all-reduce: both, each on the reduce-scatter's output; all-to-all has no hierarchical form
 *   here (its `(W − G)/W` of the bytes crossing nodes over the NICs, the rest over NVLink).
 * NCCL's tuner runs the faster; both are returned.
 */
export function fabricCollective(hw: HardwareModel, kind: CollectiveKind, bytes: number, ranks: readonly number[]): FabricCollective {
  const W = ranks.length;
  const t = hw.topology;
  const perNode = new Map<number, number>();
  for (const r of ranks) perNode.set(nodeOf(hw, r), (perNode.get(nodeOf(hw, r)) ?? 0) + 1);
  const N = perNode.size;
  if (t === undefined || N <= 1) return { ms: collectiveMs(hw, kind, bytes, W), algorithm: "nvlink" };
  const G = Math.max(...perNode.values());
  const net = t.network;
  const nics = net.nicsPerNode ?? t.gpusPerNode;
  const nic = ((net.nicGBps * Math.min(nics, t.gpusPerNode)) / t.gpusPerNode) * net.collectiveEfficiency * 1e9;
  const factor = kind === "all-reduce" ? 2 : 1;
  const ringBus = Math.min(hw.collective.busGBps * 1e9, G * nic);
  const ringMs = (hw.collective.latencyUs + (W - 1) * net.latencyUs) * US + (((W - 1) / W) * bytes * factor * 1e3) / ringBus;
  if (kind === "all-to-all") {
    const remote = ((W - G) / W) * bytes;
    const local = ((G - 1) / W) * bytes;
    const ms =
      (hw.collective.latencyUs + net.latencyUs) * US + Math.max((remote * 1e3) / nic, (local * 1e3) / (hw.collective.busGBps * 1e9));
    return ms <= ringMs
      ? { ms, algorithm: "hierarchical", ringMs, hierarchicalMs: ms }
      : { ms: ringMs, algorithm: "ring", ringMs, hierarchicalMs: ms };
  }
  // One rail's phase: its `N` ranks (one per node) gathering or reduce-scattering `total` bytes,
  // each receiving or sending `(N − 1)/N` of them over its NIC.
  const rail = (total: number): number => (N - 1) * net.latencyUs * US + (((N - 1) / N) * total * 1e3) / nic;
  let hierarchicalMs: number;
  if (kind === "all-gather") hierarchicalMs = rail((N * bytes) / W) + collectiveMs(hw, "all-gather", bytes, G);
  else if (kind === "reduce-scatter") hierarchicalMs = collectiveMs(hw, "reduce-scatter", bytes, G) + rail(bytes / G);
  else hierarchicalMs = 2 * collectiveMs(hw, "reduce-scatter", bytes, G) + 2 * rail(bytes / G);
  return hierarchicalMs <= ringMs
    ? { ms: hierarchicalMs, algorithm: "hierarchical", ringMs, hierarchicalMs }
    : { ms: ringMs, algorithm: "ring", ringMs, hierarchicalMs };
}

/** {@link fabricCollective}'s time (ms). */
export function fabricCollectiveMs(hw: HardwareModel, kind: CollectiveKind, bytes: number, ranks: readonly number[]): number {
  return fabricCollective(hw, kind, bytes, ranks).ms;
}
