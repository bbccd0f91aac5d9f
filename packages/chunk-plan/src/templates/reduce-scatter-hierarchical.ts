// Hierarchical ReduceScatter on a `[nodes, gpusPerNode]` mesh: reduce inside the node first
// (over NVLink, each rank summing its rail's shards), then across nodes (each rank pulls one
// node sum per other node over the network), so the network carries `1/G` of a flat one's bytes.
import type { ChunkPlan, Dependency, Op } from "../model/schema.js";
import { computeDep, localCopy, opRef, pull } from "../plan/builder.js";
import { PlanError } from "../plan/errors.js";
import { assemble, onTensor, partialTensor, templateContext, wholeTensor } from "./common.js";
import type { ReduceScatterOptions } from "./reduce-scatter.js";

/** Options of {@link reduceScatterHierarchical}. */
export interface HierarchicalReduceScatterOptions extends ReduceScatterOptions {
  /**
   * `"staged"` (default): one stream, the intra-node stage then the inter-node stage.
   * `"pipelined"`: the intra-node stage on stream 0, the inter-node stage on stream 1, each
   * network pull waiting only for the node sum it reads.
   */
  readonly schedule?: "staged" | "pipelined";
}

/**
 * Hierarchical ReduceScatter on mesh `[nodes, gpusPerNode]` (rank r = n · G + g owns shard r of
 * `tensor` along `axis`; partial values of the whole tensor in `src` on every rank). With G =
 * gpusPerNode, N = nodes, rank (n, g) runs:
 * 1. intra-node (stream 0): for t = 1 .. N-1 and then t = 0 (the shards other nodes wait for
 *    first, its own node's last), shard q = ((n + t) mod N, g): for i = 1 .. G-1 pull `src`
 *    shard q from node peer (n, (g + i) mod G), accumulating into its own `src` shard q (the
 *    accumulation buffer, as the ring does). Then its `src` shard q holds node n's sum of it.
 * 2. inter-node: for t = 1 .. N-1 pull `src` shard r from rank ((n - t) mod N, g), which
 *    summed it at its own step t, after that rank's last stage-1 pull into it, into `tensor`
 *    shard r (the first copies, the rest accumulate); then accumulate its own `src` shard r
 *    (node n's sum) into it (with one node: copy it). Other nodes' sums thus never wait
 *    behind this rank's own stage 1.
 * `afterCompute`: every op reading or accumulating into a `src` shard also waits for the compute
 * tiles writing that shard on the ranks holding it (GEMM + ReduceScatter overlap).
 *
 * Ops per rank: `N · G · split` (`N · (G - 1)` intra-node pulls, 1 local copy, `N - 1` network
 * pulls). Throws `invalid-mesh` unless the mesh has 2 levels.
 */
export function reduceScatterHierarchical(o: HierarchicalReduceScatterOptions): ChunkPlan {
  const ctx = templateContext(o);
  const [N, G] = ctx.mesh.shape;
  if (ctx.mesh.shape.length !== 2 || N === undefined || G === undefined) {
    throw new PlanError(
      "invalid-mesh",
      `the hierarchical ReduceScatter needs a mesh [nodes, gpusPerNode]; got [${ctx.mesh.shape.join(", ")}]`,
    );
  }
  const schedule = o.schedule ?? "staged";
  if (schedule !== "staged" && schedule !== "pipelined") {
    throw new PlanError("invalid-option", `schedule "${String(schedule)}": use "staged" or "pipelined"`);
  }
  const src = partialTensor(ctx, o);
  const reduce = o.reduce ?? "sum";
  const after = o.afterCompute ?? false;
  const part = (q: number) => onTensor(ctx.shard(q), src.name);
  // Stage-1 position of node offset t (1 .. N-1 first, 0 last) and its last op's index.
  const slot = (t: number): number => (t === 0 ? N - 1 : t - 1);
  const lastIntra = (t: number): number => slot(t) * (G - 1) + G - 2;

  const streams = (r: number): Op[][] => {
    const n = Math.floor(r / G);
    const g = r % G;
    const intra: Op[] = [];
    for (const t of [...Array.from({ length: N - 1 }, (_, k) => k + 1), 0]) {
      const q = ((n + t) % N) * G + g;
      for (let i = 1; i < G; i++) {
        const peer = n * G + ((g + i) % G);
        // The peer's partial must be computed, and so must this rank's, before a sum lands on it.
        const deps: Dependency[] = after ? [computeDep(peer, part(q)), computeDep(r, part(q))] : [];
        intra.push(pull(peer, part(q), part(q), { reduce, deps, label: `intra-node reduce ${t}.${i}` }));
      }
    }
    // The other nodes' sums first (the first one initialises the result, the rest accumulate),
    // so the network never waits behind this rank's own stage 1; its own node sum last.
    const inter: Op[] = [];
    for (let t = 1; t < N; t++) {
      const peer = ((n - t + N) % N) * G + g;
      const deps: Dependency[] = G > 1 ? [opRef(peer, 0, lastIntra(t))] : [];
      if (after) deps.push(computeDep(peer, part(r)));
      inter.push(pull(peer, part(r), ctx.shard(r), { ...(t > 1 ? { reduce } : {}), deps, label: `inter-node reduce ${t}` }));
    }
    const ownDeps: Dependency[] = after ? [computeDep(r, part(r))] : [];
    // Pipelined: the own node sum is complete after this rank's last stage-1 pull into it.
    if (schedule === "pipelined" && G > 1) ownDeps.push(opRef(r, 0, lastIntra(0)));
    inter.push(localCopy(part(r), ctx.shard(r), { ...(N > 1 ? { reduce } : {}), deps: ownDeps, label: "own node sum" }));
    return schedule === "staged" ? [[...intra, ...inter]] : [intra, inter];
  };

  return assemble(ctx, {
    name: o.name ?? `reduce-scatter-hierarchical-${schedule}`,
    tensors: [ctx.tensor, src],
    claim: { collective: "reduce-scatter", tensor: ctx.tensor.name, src: src.name, axis: ctx.axis, ranks: ctx.ranks, reduce },
    local: () => [wholeTensor(src)],
    streams,
  });
}
