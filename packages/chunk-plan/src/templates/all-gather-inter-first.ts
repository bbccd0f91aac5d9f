// Hierarchical AllGather, inter-node stage first (TileLink / NCCL's rail-then-NVLink order) on a
// `[nodes, gpusPerNode]` mesh: each rank pulls only its own rail's shards over the network
// (same GPU index on every other node), then the node spreads them over NVLink.
import type { ChunkPlan, Op } from "../model/schema.js";
import { opRef, pull } from "../plan/builder.js";
import { assemble, type TemplateContext } from "./common.js";

/**
 * Ops of the inter-node-first hierarchical AllGather (see `allGatherHierarchical`, `order:
 * "inter-node-first"`), rank r = (n, g) on mesh [N, G]:
 * 1. inter-node: for t = 1 .. N-1, pull shard `((n + t) mod N, g)` from that rank (its own
 *    shard, one rail: every rank's network traffic is `(N - 1)` shards, not node blocks);
 * 2. intra-node: for i = 1 .. G-1, peer g' = (g + i) mod G: first pull the peer's own shard
 *    `(n, g')` (no dependency), and, once every node-local shard is in flight, for t = 1 .. N-1
 *    pull shard `((n + t) mod N, g')` from the peer after its stage-1 op that fetched it.
 * `"staged"`: one stream, stage 1 then stage 2; `"pipelined"`: stage 2 on stream 0 (node-local
 * shards first, so compute can start on them while the network moves) and stage 1 on stream 1.
 *
 * Ops per rank: `(N - 1 + (G - 1) · N) · split`.
 */
export function interNodeFirstAllGather(
  ctx: TemplateContext,
  N: number,
  G: number,
  schedule: "staged" | "pipelined",
  name: string,
): ChunkPlan {
  const networkStream = schedule === "staged" ? 0 : 1;
  // Index of rank p's stage-1 op that fetched shard `(m, g)`: its position in p's network list.
  const networkIndex = (p: number, m: number): number => {
    const n = Math.floor(p / G);
    return ((m - n + N) % N) - 1;
  };
  const streams = (r: number): Op[][] => {
    const n = Math.floor(r / G);
    const g = r % G;
    const network: Op[] = [];
    for (let t = 1; t < N; t++) {
      const q = ((n + t) % N) * G + g;
      network.push(pull(q, ctx.shard(q), ctx.shard(q), { label: `inter-node step ${t}` }));
    }
    const intra: Op[] = [];
    for (let i = 1; i < G; i++) {
      const q = n * G + ((g + i) % G);
      intra.push(pull(q, ctx.shard(q), ctx.shard(q), { label: `intra-node step ${i}` }));
    }
    for (let t = 1; t < N; t++) {
      const m = (n + t) % N;
      for (let i = 1; i < G; i++) {
        const peer = n * G + ((g + i) % G);
        const shard = m * G + ((g + i) % G);
        // The peer fetched this shard in its stage 1; in the staged form its network ops come first on stream 0.
        const dep = opRef(peer, networkStream, networkIndex(peer, m));
        intra.push(pull(peer, ctx.shard(shard), ctx.shard(shard), { deps: [dep], label: `relay step ${t}.${i}` }));
      }
    }
    return schedule === "staged" ? [[...network, ...intra]] : [intra, network];
  };
  return assemble(ctx, {
    name,
    tensors: [ctx.tensor],
    claim: { collective: "all-gather", tensor: ctx.tensor.name, axis: ctx.axis, ranks: ctx.ranks },
    local: (r) => [ctx.shard(r)],
    streams,
  });
}
