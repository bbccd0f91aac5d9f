// The two-level fabric of a multi-node hardware model: ranks grouped into nodes of
// `gpusPerNode` (rank → node by floor(rank / gpusPerNode)), NVLink inside a node, NICs and an
// RDMA network between nodes. Schema pieces and the pure rank → node / NIC look-ups.
import { z } from "zod";

const Pos = z.number().positive();

/** The inter-node network as the simulator sees it: NICs per node, their bandwidth, one message's latency. */
export const NetworkModel = z.object({
  /** Bandwidth of one NIC per direction (GB/s): 400 Gb/s NDR = 50 GB/s. */
  nicGBps: Pos,
  /**
   * NICs per node (default: one per GPU, the rail-optimised layout). GPU `g` of a node sends and
   * receives through NIC `floor(g · nicsPerNode / gpusPerNode)`, so fewer NICs than GPUs share one.
   */
  nicsPerNode: z.number().int().positive().optional(),
  /** One message's latency across the network (µs): from a transfer's issue until its first byte lands. */
  latencyUs: z.number().nonnegative(),
  /** Fraction of the NIC line rate the NCCL-like collective's inter-node steps reach (protocol, headers). */
  collectiveEfficiency: z.number().positive().max(1),
});
export type NetworkModel = z.infer<typeof NetworkModel>;

/** The node structure: `nodes × gpusPerNode` GPUs, NVLink inside a node, `network` between nodes. */
export const NodeTopology = z
  .object({
    nodes: z.number().int().positive(),
    gpusPerNode: z.number().int().positive(),
    network: NetworkModel,
  })
  .refine((t) => (t.network.nicsPerNode ?? t.gpusPerNode) <= t.gpusPerNode, {
    message: "network.nicsPerNode exceeds gpusPerNode: the model gives each GPU at most one NIC",
    path: ["network", "nicsPerNode"],
  });
export type NodeTopology = z.infer<typeof NodeTopology>;

/** What the look-ups need of a hardware model (a model without `topology` is one node of any size). */
export interface HasTopology {
  readonly topology?: NodeTopology | undefined;
}

/** The node of `rank`: `floor(rank / gpusPerNode)`; 0 on a single-node model. */
export function nodeOf(hw: HasTopology, rank: number): number {
  return hw.topology === undefined ? 0 : Math.floor(rank / hw.topology.gpusPerNode);
}

/** Whether a transfer between ranks `a` and `b` leaves the node (goes over the network). */
export function crossesNodes(hw: HasTopology, a: number, b: number): boolean {
  return nodeOf(hw, a) !== nodeOf(hw, b);
}

/** The NIC `rank` sends and receives through, numbered across the cluster (`node · nicsPerNode + local NIC`). */
export function nicOf(hw: HasTopology, rank: number): number {
  const t = hw.topology;
  if (t === undefined) return 0;
  const nics = t.network.nicsPerNode ?? t.gpusPerNode;
  const local = rank % t.gpusPerNode;
  return Math.floor(rank / t.gpusPerNode) * nics + Math.floor((local * nics) / t.gpusPerNode);
}

/**
 * Processes on one node for a plan over `world` ranks: the host-side costs fitted per rank
 * (copy launch, stream-written signal) grow with the processes sharing one host, which is
 * `world` on one node and at most `gpusPerNode` across nodes.
 */
export function ranksPerNode(hw: HasTopology, world: number): number {
  return hw.topology === undefined ? world : Math.min(world, hw.topology.gpusPerNode);
}

/** Nodes a set of ranks spans. */
export function nodesSpanned(hw: HasTopology, ranks: readonly number[]): number {
  return new Set(ranks.map((r) => nodeOf(hw, r))).size;
}

/** GPUs the model describes: `nodes · gpusPerNode`, or unbounded on a single-node model. */
export function modelGpus(hw: HasTopology): number {
  return hw.topology === undefined ? Number.POSITIVE_INFINITY : hw.topology.nodes * hw.topology.gpusPerNode;
}
