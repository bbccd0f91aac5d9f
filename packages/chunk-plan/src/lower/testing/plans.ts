// Hand-built chunk plans for the signal and lowering tests (independent of the template
// module): swizzled pull AllGather, push-ring AllGather, direct GEMM+ReduceScatter.
import { CHUNK_PLAN_SCHEMA, type ChunkPlan, type Op, type Region } from "../../model/schema.js";

/** `[lo, hi)` bounds of part `j` of `n` near-equal parts of `extent` (ragged when it does not divide). */
export function part(extent: number, n: number, j: number): [number, number] {
  return [Math.floor((j * extent) / n), Math.floor(((j + 1) * extent) / n)];
}

/** Rows `[lo, hi)` of a 2-D tensor, all columns. */
export function rowsOf(tensor: string, lo: number, hi: number, cols: number): Region {
  return { tensor, offsets: [lo, 0], sizes: [hi - lo, cols] };
}

/** The `split` chunks of shard `j` of `M` rows over `world` ranks, as row ranges. */
export function shardChunks(M: number, world: number, split: number, j: number): [number, number][] {
  const [lo, hi] = part(M, world, j);
  return Array.from({ length: split }, (_, c) => {
    const [a, b] = part(hi - lo, split, c);
    return [lo + a, lo + b] as [number, number];
  });
}

/**
 * AutoOverlap Listing 2's 1-D swizzled AllGather of `A[M, K]` (pull): rank r pulls the
 * shards of peers `(r + i) % world`, i = 1..world-1, each as `split` chunks, on
 * `streams` streams (chunk ops dealt round-robin).
 */
export function allGatherPullSwizzled(o: { world: number; M: number; K: number; split?: number; streams?: number }): ChunkPlan {
  const split = o.split ?? 1;
  const streams = o.streams ?? 1;
  return {
    $schema: CHUNK_PLAN_SCHEMA,
    name: `all-gather-pull-swizzled-w${o.world}`,
    mesh: { shape: [o.world] },
    tensors: [{ name: "A", shape: [o.M, o.K], dtype: "bf16" }],
    claim: { collective: "all-gather", tensor: "A", axis: 0, ranks: Array.from({ length: o.world }, (_, r) => r) },
    ranks: Array.from({ length: o.world }, (_, rank) => {
      const [lo, hi] = part(o.M, o.world, rank);
      const lanes: Op[][] = Array.from({ length: streams }, () => []);
      let k = 0;
      for (let i = 1; i < o.world; i++) {
        const peer = (rank + i) % o.world;
        for (const [a, b] of shardChunks(o.M, o.world, split, peer)) {
          const region = rowsOf("A", a, b, o.K);
          lanes[k++ % streams]?.push({ kind: "p2p", side: "pull", peer, src: region, dst: region, deps: [] });
        }
      }
      return { rank, local: [rowsOf("A", lo, hi, o.K)], streams: lanes };
    }),
  };
}

/**
 * Ring AllGather of `A[M, K]` by pushes: at step s rank r pushes shard `(r - s) mod world`
 * to `r + 1`; for s > 0 that shard arrived from `r - 1` at step s-1, so the push depends
 * on it (a push chain: the forwarded shard lands in a transit slot).
 */
export function allGatherPushRing(o: { world: number; M: number; K: number }): ChunkPlan {
  const w = o.world;
  return {
    $schema: CHUNK_PLAN_SCHEMA,
    name: `all-gather-push-ring-w${w}`,
    mesh: { shape: [w] },
    tensors: [{ name: "A", shape: [o.M, o.K], dtype: "bf16" }],
    ranks: Array.from({ length: w }, (_, rank) => {
      const ops: Op[] = [];
      for (let s = 0; s < w - 1; s++) {
        const [lo, hi] = part(o.M, w, (((rank - s) % w) + w) % w);
        const region = rowsOf("A", lo, hi, o.K);
        const deps = s === 0 ? [] : [{ kind: "op" as const, rank: (rank - 1 + w) % w, stream: 0, index: s - 1 }];
        ops.push({ kind: "p2p", side: "push", peer: (rank + 1) % w, src: region, dst: region, deps });
      }
      const [lo, hi] = part(o.M, w, rank);
      return { rank, local: [rowsOf("A", lo, hi, o.K)], streams: [ops] };
    }),
  };
}

/**
 * Direct GEMM+ReduceScatter of the partial `C[M, N]`: rank r pushes (sum) block
 * `(shard p, column part q)` of C into `out` on rank p = `(r + i) % world`, i = 1..world-1,
 * after the compute tiles of that block are done, and reduces its own shard locally last.
 * Every `out` block on its owner thus receives `world` contributions.
 */
export function gemmReduceScatterDirect(o: { world: number; M: number; N: number; splitN?: number }): ChunkPlan {
  const w = o.world;
  const splitN = o.splitN ?? 1;
  const block = (tensor: string, p: number, q: number): Region => {
    const [lo, hi] = part(o.M, w, p);
    const [a, b] = part(o.N, splitN, q);
    return { tensor, offsets: [lo, a], sizes: [hi - lo, b - a] };
  };
  return {
    $schema: CHUNK_PLAN_SCHEMA,
    name: `gemm-reduce-scatter-direct-w${w}`,
    mesh: { shape: [w] },
    tensors: [
      { name: "C", shape: [o.M, o.N], dtype: "fp32" },
      { name: "out", shape: [o.M, o.N], dtype: "fp32" },
    ],
    ranks: Array.from({ length: w }, (_, rank) => {
      const ops: Op[] = [];
      for (let i = 1; i <= w; i++) {
        const p = (rank + i) % w;
        for (let q = 0; q < splitN; q++) {
          const deps = [{ kind: "compute" as const, rank, region: block("C", p, q) }];
          ops.push(
            p === rank
              ? { kind: "local-copy", src: block("C", p, q), dst: block("out", p, q), reduce: "sum", deps }
              : { kind: "p2p", side: "push", peer: p, src: block("C", p, q), dst: block("out", p, q), reduce: "sum", deps },
          );
        }
      }
      return { rank, local: [], streams: [ops] };
    }),
  };
}
