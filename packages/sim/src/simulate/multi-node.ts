// Multi-node hardware models: a calibrated single-node model (one GPU and its NVLink fabric)
// placed `nodes × gpusPerNode` with a NIC network between nodes. No multi-node run has been
// made here, so every network number is a datasheet lead or an assumption, labelled so.
import { H200_SXM, HardwareModel } from "./hardware.js";
import { SimulateError } from "./errors.js";
import type { NetworkModel } from "./network.js";

/**
 * One 400 Gb/s NIC per GPU (ConnectX-7 NDR, the rail-optimised H100/H200 layout): 50 GB/s per
 * direction at line rate. Datasheet leads and assumptions, not measurements: see `NETWORK_SOURCE`.
 */
export const NDR400_PER_GPU: NetworkModel = { nicGBps: 50, latencyUs: 3, collectiveEfficiency: 0.9 };

/** Provenance of {@link NDR400_PER_GPU}'s numbers, as a hardware model's `source` records them. */
export const NETWORK_SOURCE =
  "derived, not measured (no multi-node run has been made here): nicGBps 50 = one 400 Gb/s ConnectX-7 (NDR) NIC per GPU, datasheet line rate per direction, GPUDirect RDMA assumed (NIC reads and writes GPU memory; PCIe Gen5 x16 ≈ 64 GB/s is not the bound); latencyUs 3 assumed (one NDR switch hop plus RDMA issue and completion on both sides, a few µs); collectiveEfficiency 0.9 assumed (an NCCL ring's inter-node steps below line rate for protocol overhead)";

/** Options of {@link multiNode}. */
export interface MultiNodeOptions {
  readonly nodes: number;
  readonly gpusPerNode: number;
  /** The inter-node network (default {@link NDR400_PER_GPU}); fields given here replace the default's. */
  readonly network?: Partial<NetworkModel>;
  /** Model name (default `<base>_<nodes>x<gpusPerNode>`, e.g. `H200_SXM_2x8`). */
  readonly name?: string;
  /** Provenance of the network numbers (default {@link NETWORK_SOURCE} when `network` is left out). */
  readonly networkSource?: string;
}

/**
 * `base` (a single-node model: its GPU, NVLink, copy engines, NCCL-like intra-node collective)
 * repeated over `nodes` nodes of `gpusPerNode` GPUs joined by `network`. Rank `r` lives on node
 * `floor(r / gpusPerNode)`; a transfer between nodes goes over the NICs of its two ranks. Throws
 * {@link SimulateError} `bad-hardware` naming the field when the result does not validate.
 */
export function multiNode(base: HardwareModel, o: MultiNodeOptions): HardwareModel {
  const network = { ...NDR400_PER_GPU, ...o.network };
  const custom = o.network !== undefined && Object.keys(o.network).length > 0;
  const model = {
    ...base,
    name: o.name ?? `${base.name}_${o.nodes}x${o.gpusPerNode}`,
    topology: { nodes: o.nodes, gpusPerNode: o.gpusPerNode, network },
    source: {
      ...base.source,
      topology: `assumed: ${o.nodes} nodes × ${o.gpusPerNode} GPUs, rank → node = floor(rank / ${o.gpusPerNode}); NVLink numbers inside a node are ${base.name}'s`,
      network: o.networkSource ?? (custom ? "given by the caller (multiNode options)" : NETWORK_SOURCE),
    },
  };
  const parsed = HardwareModel.safeParse(model);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new SimulateError("bad-hardware", `multiNode(${base.name}): ${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data;
}

/** Two nodes of eight H200 SXM (world 16), one 400 Gb/s NIC per GPU. */
export const H200_SXM_2x8: HardwareModel = multiNode(H200_SXM, { nodes: 2, gpusPerNode: 8 });
/** Four nodes of eight H200 SXM (world 32), one 400 Gb/s NIC per GPU. */
export const H200_SXM_4x8: HardwareModel = multiNode(H200_SXM, { nodes: 4, gpusPerNode: 8 });

/** The built-in multi-node models by name (`resolveHardware` knows them too). */
export const MULTI_NODE_MODELS: Readonly<Record<string, HardwareModel>> = { H200_SXM_2x8, H200_SXM_4x8 };
