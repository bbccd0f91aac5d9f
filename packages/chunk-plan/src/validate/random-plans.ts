// Random valid chunk plans for the validator's property tests, built by hand from the
// schema alone (no template code): ring and full-mesh AllGather, push or pull, any split,
// one or two streams, in place or from a separate shard tensor; direct collectives and a
// hand-made ReduceScatter; and plan surgery (dropping an op) used to inject faults.
import fc from "fast-check";
import { CHUNK_PLAN_SCHEMA, type ChunkPlan, type CollectiveKind, type Dependency, type Op, type Region } from "../model/schema.js";
import { splitRegion } from "../region/box.js";

/** The knobs of one random AllGather plan. */
export interface AllGatherSpec {
  world: number;
  /** Shard shape: rows per rank (the gathered axis 0), then the other axes. */
  shard: number[];
  split: number;
  topology: "ring" | "full-mesh";
  side: "push" | "pull";
  streams: 1 | 2;
  /** Gather from a separate shard tensor `x` into `y` (else in place in `y`). */
  outOfPlace: boolean;
}

/** Arbitrary {@link AllGatherSpec}: world 2–7, shard up to 6 rows and up to 2 more axes. */
export const allGatherSpec: fc.Arbitrary<AllGatherSpec> = fc
  .record({
    world: fc.integer({ min: 2, max: 7 }),
    shard: fc
      .tuple(fc.integer({ min: 1, max: 6 }), fc.array(fc.integer({ min: 1, max: 5 }), { maxLength: 2 }))
      .map(([rows, rest]) => [rows, ...rest]),
    split: fc.integer({ min: 1, max: 6 }),
    topology: fc.constantFrom("ring" as const, "full-mesh" as const),
    side: fc.constantFrom("push" as const, "pull" as const),
    streams: fc.constantFrom(1 as const, 2 as const),
    outOfPlace: fc.boolean(),
  })
  .map((s) => ({ ...s, split: Math.min(s.split, s.shard[0] ?? 1) }));

interface Planned {
  op: Op;
  /** Key of the op this one must wait for (the write of the data it forwards), if any. */
  after?: string;
}

/** Builds a valid AllGather plan for `spec`, with its claim. */
export function allGatherPlan(spec: AllGatherSpec): ChunkPlan {
  const { world: W, shard, split } = spec;
  const rows = shard[0] ?? 1;
  const shape = [W * rows, ...shard.slice(1)];
  const zeros = shape.map(() => 0);
  const slabOf = (q: number): Region => ({ tensor: "y", offsets: [q * rows, ...zeros.slice(1)], sizes: [...shard] });
  const chunks = (q: number): Region[] => splitRegion(slabOf(q), split, 0);
  const own = (q: number, k: number): Region => {
    const c = chunks(q)[k] as Region;
    return spec.outOfPlace ? { tensor: "x", offsets: [(c.offsets[0] ?? 0) - q * rows, ...zeros.slice(1)], sizes: c.sizes } : c;
  };
  // Per rank, ops keyed by "rank/shard/chunk" of the data they deliver.
  const perRank: { key: string; planned: Planned }[][] = Array.from({ length: W }, () => []);
  const mod = (a: number): number => ((a % W) + W) % W;
  for (let r = 0; r < W; r++) {
    // Out of place, each rank also places its own shard into the result.
    if (spec.outOfPlace) {
      for (let k = 0; k < split; k++) {
        perRank[r]?.push({
          key: `${r}/${r}/${k}`,
          planned: { op: { kind: "local-copy", src: own(r, k), dst: chunks(r)[k] as Region, deps: [] } },
        });
      }
    }
    for (let t = 0; t < W - 1; t++) {
      for (let k = 0; k < split; k++) {
        if (spec.topology === "full-mesh") {
          const peer = mod(r + t + 1);
          const op: Op =
            spec.side === "push"
              ? { kind: "p2p", side: "push", peer, src: own(r, k), dst: chunks(r)[k] as Region, deps: [] }
              : { kind: "p2p", side: "pull", peer, src: own(peer, k), dst: chunks(peer)[k] as Region, deps: [] };
          perRank[r]?.push({ key: `${spec.side === "push" ? peer : r}/${spec.side === "push" ? r : peer}/${k}`, planned: { op } });
          continue;
        }
        if (spec.side === "push") {
          // Step t: forward shard r - t (own at t = 0) to the next rank.
          const c = mod(r - t);
          const src = t === 0 ? own(r, k) : (chunks(c)[k] as Region);
          const op: Op = { kind: "p2p", side: "push", peer: mod(r + 1), src, dst: chunks(c)[k] as Region, deps: [] };
          perRank[r]?.push({ key: `${mod(r + 1)}/${c}/${k}`, planned: t === 0 ? { op } : { op, after: `${r}/${c}/${k}` } });
        } else {
          // Step t: pull shard r - 1 - t from the previous rank, which holds it after its step t - 1.
          const c = mod(r - 1 - t);
          const prev = mod(r - 1);
          const src = t === 0 ? own(prev, k) : (chunks(c)[k] as Region);
          const op: Op = { kind: "p2p", side: "pull", peer: prev, src, dst: chunks(c)[k] as Region, deps: [] };
          perRank[r]?.push({ key: `${r}/${c}/${k}`, planned: t === 0 ? { op } : { op, after: `${prev}/${c}/${k}` } });
        }
      }
    }
  }
  // Assign streams (chunk k on stream k mod streams), then resolve "after" keys to addresses.
  const address = new Map<string, Dependency>();
  const streams: Op[][][] = perRank.map((ops, r) => {
    const lists: Op[][] = Array.from({ length: spec.streams }, () => []);
    ops.forEach(({ key, planned }, n) => {
      const s = n % spec.streams;
      address.set(key, { kind: "op", rank: r, stream: s, index: lists[s]?.length ?? 0 });
      lists[s]?.push(planned.op);
    });
    return lists;
  });
  for (const ops of perRank) {
    for (const { planned } of ops) {
      const dep = planned.after === undefined ? undefined : address.get(planned.after);
      if (dep !== undefined) planned.op.deps.push(dep);
    }
  }
  const tensors: ChunkPlan["tensors"] = [{ name: "y", shape, dtype: "bf16" }];
  if (spec.outOfPlace) tensors.push({ name: "x", shape: [...shard], dtype: "bf16" });
  const ranks = Array.from({ length: W }, (_, r) => r);
  return {
    $schema: CHUNK_PLAN_SCHEMA,
    name: `random-${spec.topology}-${spec.side}`,
    mesh: { shape: [W] },
    tensors,
    claim: { collective: "all-gather", tensor: "y", axis: 0, ranks, ...(spec.outOfPlace ? { src: "x" } : {}) },
    ranks: ranks.map((r) => ({
      rank: r,
      local: [spec.outOfPlace ? { tensor: "x", offsets: shard.map(() => 0), sizes: [...shard] } : slabOf(r)],
      streams: streams[r] ?? [],
    })),
  };
}

/** Every op of a plan with its address. */
export function opAddresses(plan: ChunkPlan): { rank: number; stream: number; index: number; op: Op }[] {
  return plan.ranks.flatMap((rp) => rp.streams.flatMap((ops, stream) => ops.map((op, index) => ({ rank: rp.rank, stream, index, op }))));
}

/** The plan without op `(rank, stream, index)`: later ops shift down and dependencies follow them. */
export function removeOp(plan: ChunkPlan, rank: number, stream: number, index: number): ChunkPlan {
  const copy = structuredClone(plan);
  copy.ranks[rank]?.streams[stream]?.splice(index, 1);
  for (const rp of copy.ranks) {
    for (const ops of rp.streams) {
      for (const op of ops) {
        op.deps = op.deps.flatMap((d) => {
          if (d.kind !== "op" || d.rank !== rank || d.stream !== stream || d.index < index) return [d];
          return d.index === index ? [] : [{ ...d, index: d.index - 1 }];
        });
      }
    }
  }
  return copy;
}

/** A region literal. */
export const box = (tensor: string, offsets: number[], sizes: number[]): Region => ({ tensor, offsets, sizes });

/** Direct ReduceScatter by hand: rank i seeds `out` with its own slab i, peers then reduce into it. */
export function reduceScatterPlan(world: number, rows: number, opts: { dropFrom?: [number, number]; noSeedDep?: boolean } = {}): ChunkPlan {
  const slab = (i: number): Region => box("part", [i * rows, 0], [rows, 3]);
  const ranks = Array.from({ length: world }, (_, r) => r);
  return {
    $schema: CHUNK_PLAN_SCHEMA,
    name: "rs-direct",
    mesh: { shape: [world] },
    tensors: [
      { name: "part", shape: [world * rows, 3], dtype: "fp32" },
      { name: "out", shape: [rows, 3], dtype: "fp32" },
    ],
    claim: { collective: "reduce-scatter", tensor: "out", src: "part", axis: 0, ranks, reduce: "sum" },
    ranks: ranks.map((r) => ({
      rank: r,
      local: [box("part", [0, 0], [world * rows, 3])],
      streams: [
        [
          { kind: "local-copy", src: slab(r), dst: box("out", [0, 0], [rows, 3]), deps: [] } as Op,
          ...ranks
            .filter((i) => i !== r && !(opts.dropFrom?.[0] === r && opts.dropFrom[1] === i))
            .map(
              (i): Op => ({
                kind: "p2p",
                side: "push",
                peer: i,
                src: slab(i),
                dst: box("out", [0, 0], [rows, 3]),
                reduce: "sum",
                deps: opts.noSeedDep ? [] : [{ kind: "op", rank: i, stream: 0, index: 0 }],
              }),
            ),
        ],
      ],
    })),
  };
}

/** One direct collective per rank over the whole mesh. */
export function collectivePlan(kind: CollectiveKind, world: number, rows: number): ChunkPlan {
  const ranks = Array.from({ length: world }, (_, r) => r);
  const full = world * rows;
  const [srcRows, dstRows] = kind === "all-gather" ? [rows, full] : kind === "reduce-scatter" ? [full, rows] : [full, full];
  return {
    $schema: CHUNK_PLAN_SCHEMA,
    name: `direct-${kind}`,
    mesh: { shape: [world] },
    tensors: [
      { name: "a", shape: [srcRows, 2], dtype: "bf16" },
      { name: "b", shape: [dstRows, 2], dtype: "bf16" },
    ],
    claim: { collective: kind, tensor: "b", src: "a", axis: 0, ranks, ...(kind.includes("reduce") ? { reduce: "sum" as const } : {}) },
    ranks: ranks.map((r) => ({
      rank: r,
      local: [box("a", [0, 0], [srcRows, 2])],
      streams: [
        [
          {
            kind: "collective",
            collective: kind,
            ranks,
            axis: 0,
            src: box("a", [0, 0], [srcRows, 2]),
            dst: box("b", [0, 0], [dstRows, 2]),
            ...(kind.includes("reduce") ? { reduce: "sum" as const } : {}),
            deps: [],
          },
        ],
      ],
    })),
  };
}
