// Per-rank facts of a scheduled CommIR program on a mesh: which region of each buffer a
// rank holds (its shards), which it reads (needed), and which communication that implies
// (Mercury §4.2, §7.3). Lowering, the memory estimate and the cost model all read these.
import { type Mesh, meshCoords, meshRanks, partition, rankOf, type Region, type TensorDecl } from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";
import { evalExpr, type IndexExpr } from "./expr.js";
import { type BufferDecl, bufferOf, bufferShape, type DimBinding, dimVars, type Loop, type Program } from "./ir.js";
import { loopPoints } from "./interpret.js";
import { broadcastSteps, type BroadcastSteps } from "./broadcast.js";

/** How a buffer's data reaches the ranks that read it, or how partial outputs combine. */
export type CommKind = "local" | "ring" | "broadcast" | "all-gather" | "p2p" | "all-reduce" | "reduce-scatter";

/** One buffer's per-rank facts. */
export interface BufferFacts {
  readonly buffer: string;
  readonly role: "read" | "write";
  readonly tensor: TensorDecl;
  readonly comm: CommKind;
  /** Per rank, the region it holds before the operator (inputs) or computes (output). */
  readonly held: readonly Region[];
  /** Per rank, the region it reads (inputs) or ends with (output). */
  readonly needed: readonly Region[];
  /** Per rank, the ranks it exchanges with for this buffer (itself included, ascending). */
  readonly group: readonly (readonly number[])[];
  /** Ring only: the shifted loops driving the passes, in loop order, with their mesh levels. */
  readonly ring?: readonly { readonly loop: string; readonly level: number; readonly extent: number }[];
  /** Broadcast only: the local loop stepping through the blocks and the owner read at each step. */
  readonly broadcast?: BroadcastSteps;
  /** Reduce-scatter only: the dimension the reduced output is cut along. */
  readonly dim?: number;
}

/** A program's analysis on a mesh. */
export interface ProgramFacts {
  readonly program: Program;
  readonly mesh: Mesh;
  /** Parallel loop name → mesh level. */
  readonly levels: Readonly<Record<string, number>>;
  readonly buffers: readonly BufferFacts[];
  /** Loop points each rank executes (the product of its local loops' extents). */
  readonly pointsPerRank: number;
}

/** Checks that every mesh level has exactly one parallel loop of the level's size. */
export function checkMesh(p: Program, mesh: Mesh): Record<string, number> {
  const levels: Record<string, number> = {};
  const par = p.loops.filter((l) => l.parallel);
  mesh.shape.forEach((n, level) => {
    const l = par.find((x) => x.parallel!.level === level);
    if (l === undefined)
      throw new FrontendError(
        "mesh-mismatch",
        `mesh level ${level} (size ${n}) has no parallel loop; parallelize a loop of extent ${n} at level ${level}`,
      );
    if (l.extent !== n)
      throw new FrontendError(
        "mesh-mismatch",
        `loop ${l.name} has extent ${l.extent} but mesh level ${level} has ${n} ranks; tile it to ${n} first`,
      );
    levels[l.name] = level;
  });
  for (const l of par)
    if (l.parallel!.level >= mesh.shape.length)
      throw new FrontendError(
        "mesh-mismatch",
        `loop ${l.name} is parallel at level ${l.parallel!.level}, but the mesh has ${mesh.shape.length} levels`,
      );
  return levels;
}

/** The tensor declaration of a buffer. */
export function tensorOf(p: Program, b: BufferDecl, name = b.name): TensorDecl {
  return { name, shape: bufferShape(p, b), dtype: b.dtype };
}

/** Parallel loop values of `rank`. */
export function rankEnv(mesh: Mesh, levels: Readonly<Record<string, number>>, rank: number): Record<string, number> {
  const c = meshCoords(rank, mesh);
  return Object.fromEntries(Object.entries(levels).map(([name, level]) => [name, c[level]!]));
}

/** The region of buffer `b` rank `rank` holds: its shards cut in mesh-level order (outer first). */
export function heldRegion(p: Program, mesh: Mesh, levels: Readonly<Record<string, number>>, b: BufferDecl, rank: number): Region {
  const shape = bufferShape(p, b);
  const env = rankEnv(mesh, levels, rank);
  const offsets = shape.map(() => 0);
  const sizes = [...shape];
  const shards = [...(p.shards[b.name] ?? [])].sort((x, y) => levels[x.loop]! - levels[y.loop]!);
  for (const s of shards) {
    const n = mesh.shape[levels[s.loop]!]!;
    if (sizes[s.dim]! < n) {
      throw new FrontendError(
        "unsupported-schedule",
        `buffer ${b.name}: dimension ${s.dim} has ${sizes[s.dim]} entries left for the ${n} ranks of loop ${s.loop}; replicate it over ${s.loop}`,
      );
    }
    const span = partition(sizes[s.dim]!, n)[env[s.loop]!]!;
    offsets[s.dim] = offsets[s.dim]! + span.offset;
    sizes[s.dim] = span.size;
  }
  return { tensor: b.name, offsets, sizes };
}

/**
 * The box of buffer `b` read by loop points with `env` fixed (parallel loops, and shifted
 * loops at one ring step): per dimension, the indices its expression takes over the free
 * loops it reads (bounded by interval arithmetic past 4096 points). Strided accesses are
 * refused where enumerated; dimensions sharing a
 * loop are bounded independently (a box that covers the access).
 */
export function accessBox(p: Program, b: BufferDecl, env: Readonly<Record<string, number>>): Region {
  const offsets: number[] = [];
  const sizes: number[] = [];
  for (const d of b.dims) {
    const vars = dimVars(p, d);
    const loops: Loop[] = p.loops.filter((l) => vars.has(l.name));
    const free = loops.filter((l) => env[l.name] === undefined).reduce((a, l) => a * l.extent, 1);
    if (free > ENUMERATION_LIMIT) {
      const [lo, hi] = dimBounds(p, d, loops, env);
      offsets.push(lo);
      sizes.push(hi - lo + 1);
      continue;
    }
    const seen = new Set<number>();
    for (const pt of loopPoints(loops, env)) {
      let idx = 0;
      for (const a of d.axes) idx = idx * p.axes.find((x) => x.name === a)!.extent + evalExpr(p.bindings[a]!, pt);
      seen.add(Math.floor(idx / (d.scale ?? 1)));
    }
    const lo = Math.min(...seen);
    const hi = Math.max(...seen);
    if (hi - lo + 1 !== seen.size) {
      throw new FrontendError(
        "unsupported-schedule",
        `buffer ${b.name} is read with a stride along one dimension; tile or reorder so each rank reads a contiguous block`,
      );
    }
    offsets.push(lo);
    sizes.push(hi - lo + 1);
  }
  return { tensor: b.name, offsets, sizes };
}

/** Above this many free loop points per dimension, accesses are bounded by interval arithmetic instead of enumerated. */
const ENUMERATION_LIMIT = 4096;

type Interval = readonly [number, number];

/** Interval bounds of an index expression; a `mod` whose argument wraps takes the whole `[0, k)`. */
function bounds(e: IndexExpr, range: (name: string) => Interval): Interval {
  switch (e.kind) {
    case "var":
      return range(e.name);
    case "add": {
      const a = bounds(e.a, range);
      const b = bounds(e.b, range);
      return [a[0] + b[0], a[1] + b[1]];
    }
    case "mul": {
      const a = bounds(e.a, range);
      return [a[0] * e.k, a[1] * e.k];
    }
    case "div": {
      const a = bounds(e.a, range);
      return [Math.floor(a[0] / e.k), Math.floor(a[1] / e.k)];
    }
    case "mod": {
      const a = bounds(e.a, range);
      const lo = ((a[0] % e.k) + e.k) % e.k;
      return a[1] - a[0] + 1 >= e.k || lo + (a[1] - a[0]) >= e.k ? [0, e.k - 1] : [lo, lo + a[1] - a[0]];
    }
  }
}

function dimBounds(p: Program, d: DimBinding, loops: readonly Loop[], env: Readonly<Record<string, number>>): Interval {
  const range = (name: string): Interval => {
    const fixed = env[name];
    if (fixed !== undefined) return [fixed, fixed];
    const l = loops.find((x) => x.name === name)!;
    return [0, l.extent - 1];
  };
  let lo = 0;
  let hi = 0;
  for (const a of d.axes) {
    const ext = p.axes.find((x) => x.name === a)!.extent;
    const [l, h] = bounds(p.bindings[a]!, range);
    lo = lo * ext + l;
    hi = hi * ext + h;
  }
  const scale = d.scale ?? 1;
  return [Math.floor(lo / scale), Math.floor(hi / scale)];
}

function contains(outer: Region, inner: Region): boolean {
  return inner.offsets.every((o, d) => o >= outer.offsets[d]! && o + inner.sizes[d]! <= outer.offsets[d]! + outer.sizes[d]!);
}

function overlaps(a: Region, b: Region): boolean {
  return a.offsets.every((o, d) => o < b.offsets[d]! + b.sizes[d]! && b.offsets[d]! < o + a.sizes[d]!);
}

/** Ranks that differ from `rank` only at mesh `levels`. */
function groupAt(mesh: Mesh, rank: number, lv: readonly number[]): number[] {
  const mine = meshCoords(rank, mesh);
  return meshRanks(mesh).filter((q) => meshCoords(q, mesh).every((c, l) => lv.includes(l) || c === mine[l]));
}

/** Analyses `p` on `mesh`: per buffer, held and needed regions per rank and the implied communication. */
export function analyzeProgram(p: Program, meshIn: Mesh | readonly number[]): ProgramFacts {
  const mesh: Mesh = { shape: "shape" in meshIn ? [...meshIn.shape] : [...meshIn] };
  const levels = checkMesh(p, mesh);
  const ranks = meshRanks(mesh);
  const env = ranks.map((r) => rankEnv(mesh, levels, r));
  const buffers: BufferFacts[] = [];
  for (const name of p.inputs) {
    const b = bufferOf(p, name);
    const held = ranks.map((r) => heldRegion(p, mesh, levels, b, r));
    const needed = ranks.map((r) => accessBox(p, b, env[r]!));
    // A ring needs the buffer cut over the shifting parallel loop along the shifted loop's dim.
    const shards = p.shards[name] ?? [];
    const ring = p.loops
      .filter((l) => {
        const by = l.shift?.by;
        if (by === undefined) return false;
        // The shard's dim must be read through the shifted loop and not be `by`'s own axis
        // (else each rank stays inside its own block and the shift only reorders its reads).
        const byAxes = p.loops.find((x) => x.name === by)!.origin;
        return shards.some(
          (s) => s.loop === by && dimVars(p, b.dims[s.dim]!).has(l.name) && !b.dims[s.dim]!.axes.some((a) => byAxes.includes(a)),
        );
      })
      .map((l) => ({ loop: l.name, level: levels[l.shift!.by]!, extent: l.extent }));
    const tensor = tensorOf(p, b);
    if (ring.length > 0) {
      checkRing(p, mesh, levels, b, held, ring);
      const group = ranks.map((r) =>
        groupAt(
          mesh,
          r,
          ring.map((x) => x.level),
        ),
      );
      buffers.push({ buffer: name, role: "read", tensor, comm: "ring", held, needed, group, ring });
      continue;
    }
    if (ranks.every((r) => contains(held[r]!, needed[r]!))) {
      buffers.push({ buffer: name, role: "read", tensor, comm: "local", held, needed, group: ranks.map((r) => [r]) });
      continue;
    }
    const group = ranks.map((r) => ranks.filter((q) => q === r || overlaps(held[q]!, needed[r]!)));
    const parts = (loop: string): number => mesh.shape[levels[loop]!]!;
    const broadcast = broadcastSteps(p, b, held, group, parts, (r, extra) => accessBox(p, b, { ...env[r]!, ...extra }));
    if (broadcast !== undefined) {
      buffers.push({ buffer: name, role: "read", tensor, comm: "broadcast", held, needed, group, broadcast });
      continue;
    }
    buffers.push({ buffer: name, role: "read", tensor, comm: gatherable(held, needed, group) ? "all-gather" : "p2p", held, needed, group });
  }
  const out = bufferOf(p, p.output);
  const computed = ranks.map((r) => accessBox(p, out, env[r]!));
  const outVars = new Set(out.dims.flatMap((d) => [...dimVars(p, d)]));
  const redLoops = Object.keys(levels).filter((l) => !outVars.has(l));
  const tensor = tensorOf(p, out);
  if (redLoops.length === 0) {
    buffers.push({
      buffer: p.output,
      role: "write",
      tensor,
      comm: "local",
      held: computed,
      needed: computed,
      group: ranks.map((r) => [r]),
    });
  } else {
    const group = ranks.map((r) =>
      groupAt(
        mesh,
        r,
        redLoops.map((l) => levels[l]!),
      ),
    );
    const scatter = (p.shards[p.output] ?? []).find((s) => redLoops.includes(s.loop));
    if (scatter === undefined) {
      buffers.push({ buffer: p.output, role: "write", tensor, comm: "all-reduce", held: computed, needed: computed, group });
    } else {
      const needed = ranks.map((r) => {
        const g = group[r]!;
        const region = computed[r]!;
        const n = g.length;
        if (region.sizes[scatter.dim]! % n !== 0) {
          throw new FrontendError(
            "unsupported-schedule",
            `output ${p.output} is reduce-scattered over ${n} ranks along dim ${scatter.dim} of extent ${region.sizes[scatter.dim]}; pick a divisible extent`,
          );
        }
        const size = region.sizes[scatter.dim]! / n;
        const offsets = [...region.offsets];
        offsets[scatter.dim] = offsets[scatter.dim]! + g.indexOf(r) * size;
        const sizes = [...region.sizes];
        sizes[scatter.dim] = size;
        return { tensor: p.output, offsets, sizes };
      });
      buffers.push({ buffer: p.output, role: "write", tensor, comm: "reduce-scatter", held: computed, needed, group, dim: scatter.dim });
    }
  }
  const pointsPerRank = p.loops.filter((l) => !l.parallel).reduce((a, l) => a * l.extent, 1);
  return { program: p, mesh, levels, buffers, pointsPerRank };
}

/** Ring steps over the shifted loops, lexicographic in loop order (`[0, ..., 0]` first). */
export function ringSteps(ring: readonly { readonly extent: number }[]): number[][] {
  let steps: number[][] = [[]];
  for (const l of ring) steps = steps.flatMap((s) => Array.from({ length: l.extent }, (_, i) => [...s, i]));
  return steps;
}

/** The rank holding the block rank `r` reads at ring step `s`: `r + s` per shifted level, mod its size. */
export function ringOwner(mesh: Mesh, ring: readonly { readonly level: number }[], r: number, s: readonly number[]): number {
  const c = meshCoords(r, mesh);
  ring.forEach((l, k) => (c[l.level] = (c[l.level]! + s[k]!) % mesh.shape[l.level]!));
  return rankOf(c, mesh);
}

/**
 * Checks that at every step each rank reads inside its owner's block; shards of one dim
 * nest in mesh-level order, so a schedule whose index nests them otherwise is refused.
 */
function checkRing(
  p: Program,
  mesh: Mesh,
  levels: Readonly<Record<string, number>>,
  b: BufferDecl,
  held: readonly Region[],
  ring: NonNullable<BufferFacts["ring"]>,
): void {
  for (const s of ringSteps(ring)) {
    for (const r of meshRanks(mesh)) {
      const q = ringOwner(mesh, ring, r, s);
      const env = { ...rankEnv(mesh, levels, r), ...Object.fromEntries(ring.map((l, k) => [l.loop, s[k]!])) };
      if (!contains(held[q]!, accessBox(p, b, env))) {
        throw new FrontendError(
          "unsupported-schedule",
          `buffer ${b.name}: at ring step [${s.join(", ")}] rank ${r} reads outside the block of rank ${q}; shard ${b.name} so its blocks follow the shifted loop (shards of one dim nest outer mesh level first)`,
        );
      }
    }
  }
}

/** An all-gather fits when each group's held regions are equal slabs, in rank order, along one dim, tiling what every member needs. */
function gatherable(held: readonly Region[], needed: readonly Region[], group: readonly (readonly number[])[]): boolean {
  return group.every((g, r) => {
    const hs = g.map((q) => held[q]!);
    const need = needed[r]!;
    if (
      g.some(
        (q) =>
          group[q]!.join() !== g.join() ||
          needed[q]!.offsets.join() !== need.offsets.join() ||
          needed[q]!.sizes.join() !== need.sizes.join(),
      )
    )
      return false;
    const dims = need.sizes.map((_, d) => d).filter((d) => hs.some((h) => h.offsets[d] !== hs[0]!.offsets[d]));
    if (dims.length > 1) return false;
    const d = dims[0] ?? 0;
    return (
      hs.every(
        (h, i) =>
          h.sizes[d] === hs[0]!.sizes[d] &&
          h.offsets[d] === need.offsets[d]! + i * hs[0]!.sizes[d]! &&
          h.sizes.every((s, e) => e === d || (s === need.sizes[e] && h.offsets[e] === need.offsets[e])),
      ) && hs.length * hs[0]!.sizes[d]! === need.sizes[d]
    );
  });
}
