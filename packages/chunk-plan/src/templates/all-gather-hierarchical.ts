// Hierarchical 2-D AllGather (AutoOverlap Fig. 4e) on a `[nodes, gpusPerNode]` mesh: ranks
// first gather their node's shards over the fast intra-node links, then pull whole node
// blocks from the same-GPU rank of every other node, so op count stays ~ (gpus + nodes) x split.
import type { ChunkPlan, Dependency, Op, Region } from "../model/schema.js";
import { opRef } from "../plan/builder.js";
import { PlanError } from "../plan/errors.js";
import { frozenDependencies, frozenRegion, NO_DEPENDENCIES } from "../plan/frozen.js";
import { shardSpanRegion, splitChunks } from "../plan/shard.js";
import { interNodeFirstAllGather } from "./all-gather-inter-first.js";
import { assemble, templateContext, type TemplateOptions } from "./common.js";

/** Options of {@link allGatherHierarchical}. */
export interface HierarchicalAllGatherOptions extends TemplateOptions {
  /**
   * `"staged"` (default): one stream per rank, the intra-node stage then the inter-node
   * stage. `"pipelined"`: the intra-node stage on stream 0 and the inter-node stage on
   * stream 1, each inter-node chunk waiting only for the peer's intra-node chunks it reads.
   */
  readonly schedule?: "staged" | "pipelined";
  /**
   * `"intra-node-first"` (default): gather the node's shards over NVLink, then pull whole node
   * blocks over the network (every rank of a node pulls the same blocks). `"inter-node-first"`:
   * pull the rail's shards over the network (each rank only its GPU index's), then relay them
   * over NVLink (`./all-gather-inter-first.ts`): `1/G` of the network bytes.
   */
  readonly order?: "intra-node-first" | "inter-node-first";
}

function intervalsOverlap(a: Region, b: Region, axis: number): boolean {
  const ao = a.offsets[axis]!;
  const bo = b.offsets[axis]!;
  return ao < bo + b.sizes[axis]! && bo < ao + a.sizes[axis]!;
}

/**
 * Hierarchical AllGather on mesh `[nodes, gpusPerNode]` (rank = node * gpusPerNode + gpu;
 * rank r owns shard r along `axis`, so node m's shards form one contiguous block). With
 * G = gpusPerNode, N = nodes and S = split, every rank (n, g) runs, chunk round by round
 * (round j moves chunk j of every source):
 * 1. intra-node: for i = 1 .. G-1, pull chunk j of shard `(n, (g + i) mod G)` from that rank
 *    (the 1-D swizzle inside the node);
 * 2. inter-node: for t = 1 .. N-1, pull chunk j of node `(n + t) mod N`'s whole block from
 *    rank `((n + t) mod N, g)`, which gathered it in its own stage 1. The op depends on the
 *    last of that peer's stage-1 ops whose chunk it reads (stream order covers the rest).
 * Chunks are cut along `splitAxis` (default `axis`); when it differs from `axis`, chunk j of
 * a node block is exactly the chunks j of its shards, so the inter-node stage pipelines
 * behind the intra-node one.
 *
 * Ops per rank: `(G - 1 + N - 1) * S`. Throws `invalid-mesh` unless the mesh has 2 levels.
 */
export function allGatherHierarchical(o: HierarchicalAllGatherOptions): ChunkPlan {
  const ctx = templateContext(o);
  const [N, G] = ctx.mesh.shape;
  if (ctx.mesh.shape.length !== 2 || N === undefined || G === undefined) {
    throw new PlanError("invalid-mesh", `the hierarchical AllGather needs a mesh [nodes, gpusPerNode]; got [${ctx.mesh.shape.join(", ")}]`);
  }
  const schedule = o.schedule ?? "staged";
  const order = o.order ?? "intra-node-first";
  if (order === "inter-node-first")
    return interNodeFirstAllGather(ctx, N, G, schedule, o.name ?? `all-gather-hierarchical-inter-first-${schedule}`);
  if (order !== "intra-node-first") {
    throw new PlanError("invalid-option", `order "${String(order)}": use "intra-node-first" or "inter-node-first"`);
  }
  const S = ctx.split;
  // Every op that moves chunk j of shard q (or of node block m) holds the same frozen region,
  // as its src and as its dst: one region per chunk, not two per op.
  const chunksOfShard = ctx.ranks.map((q) => splitChunks(ctx.shard(q), S, ctx.splitAxis).map(frozenRegion));
  const chunksOfBlock = Array.from({ length: N }, (_, m) =>
    splitChunks(shardSpanRegion(ctx.tensor, ctx.axis, ctx.world, m * G, G), S, ctx.splitAxis).map(frozenRegion),
  );
  const intraIndex = (g: number, q: number, j: number): number => j * (G - 1) + (((q % G) - g + G) % G) - 1;

  // The stage-1 op on rank p that completes the data of p's node-block chunk j: the latest,
  // in p's stream order, of the stage-1 chunks it overlaps. Cached per (p, j), frozen: the
  // N - 1 ops that pull that chunk from p hold the same list.
  const cache: (Dependency[] | undefined)[] = new Array(ctx.world * S);
  const stageOneDeps = (p: number, j: number): Dependency[] => {
    const key = p * S + j;
    const hit = cache[key];
    if (hit !== undefined) return hit;
    const m = Math.floor(p / G);
    const g = p % G;
    const want = chunksOfBlock[m]![j]!;
    let last = -1;
    for (let local = 0; local < G; local++) {
      const q = m * G + local;
      if (q === p) continue;
      for (let jj = S - 1; jj >= 0; jj--) {
        if (intervalsOverlap(chunksOfShard[q]![jj]!, want, ctx.splitAxis)) {
          last = Math.max(last, intraIndex(g, q, jj));
          break;
        }
      }
    }
    const deps = last < 0 ? NO_DEPENDENCIES : frozenDependencies([opRef(p, 0, last)]);
    cache[key] = deps;
    return deps;
  };

  const suffix = (j: number): string => (S === 1 ? "" : ` [${j + 1}/${S}]`);
  // Labels depend on (step, chunk) only: built once, not once per op.
  const intraLabels = Array.from({ length: S * G }, (_, k) => `intra-node step ${k % G}${suffix(Math.floor(k / G))}`);
  const interLabels = Array.from({ length: S * N }, (_, k) => `inter-node step ${k % N}${suffix(Math.floor(k / N))}`);
  const streams = (r: number): Op[][] => {
    const n = Math.floor(r / G);
    const g = r % G;
    const intra: Op[] = [];
    // Staged: one stream, the inter-node ops after the intra-node ones in the same list.
    const inter: Op[] = schedule === "staged" ? intra : [];
    for (let j = 0; j < S; j++) {
      for (let i = 1; i < G; i++) {
        const q = n * G + ((g + i) % G);
        intra.push(sharedPull(q, chunksOfShard[q]![j]!, NO_DEPENDENCIES, intraLabels[j * G + i]!));
      }
    }
    for (let j = 0; j < S; j++) {
      for (let t = 1; t < N; t++) {
        const m = (n + t) % N;
        const p = m * G + g;
        inter.push(sharedPull(p, chunksOfBlock[m]![j]!, stageOneDeps(p, j), interLabels[j * N + t]!));
      }
    }
    return schedule === "staged" ? [intra] : [intra, inter];
  };

  return assemble(
    { ...ctx, split: 1 },
    {
      name: o.name ?? `all-gather-hierarchical-${schedule}`,
      tensors: [ctx.tensor],
      claim: { collective: "all-gather", tensor: ctx.tensor.name, axis: ctx.axis, ranks: ctx.ranks },
      local: (r) => [ctx.shard(r)],
      streams,
      owned: true,
    },
  );
}

/**
 * A pull of `chunk` from `peer` into the same place, with the keys `pull` gives it: a fresh op
 * holding the frozen `chunk` as its src and dst and the frozen `deps` (so the plan can hold
 * the op itself: `PlanParts.owned`).
 */
function sharedPull(peer: number, chunk: Region, deps: Dependency[], label: string): Op {
  return { kind: "p2p", side: "pull", peer, src: chunk, dst: chunk, deps, label };
}
