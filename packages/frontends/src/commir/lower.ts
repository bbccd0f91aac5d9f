// CommIR → chunk plan (Mercury §7.3 "communication kernel generation"): shift becomes P2P
// ring passes (multi-level on hierarchical meshes), a sharded read buffer an all-gather (or
// P2P pulls from owners), a reduced output an all-reduce or reduce-scatter.
import {
  type ChunkPlan,
  type Claim,
  collective,
  computeDep,
  intersect,
  type Mesh,
  meshCoords,
  type OpRef,
  PlanBuilder,
  pull,
  rankOf,
  type Region,
  regionVolume,
  subtract,
} from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";
import { analyzeProgram, type BufferFacts, type ProgramFacts, ringOwner, ringSteps } from "./analyze.js";
import type { Program } from "./ir.js";

/** A lowered program: its analysis and the chunk plan of its communication. */
export interface LoweredProgram {
  readonly facts: ProgramFacts;
  readonly plan: ChunkPlan;
}

/** Name of the buffer a rank's partial output is computed into before a reduction. */
export const partialOutput = (name: string): string => `${name}_partial`;

/**
 * Lowers `p` on `mesh` to a chunk plan: one rank plan per mesh rank, stream 0 carrying the
 * input transfers in ring-step order, then the output reduction (after the compute event
 * of the partial output). The plan claims a collective when one buffer's communication is
 * a whole-mesh all-gather, all-reduce or reduce-scatter, so `validatePlan` proves it.
 */
export function lowerProgram(p: Program, mesh: Mesh | readonly number[]): LoweredProgram {
  const facts = analyzeProgram(p, mesh);
  const world = facts.mesh.shape.reduce((a, b) => a * b, 1);
  const ranks = Array.from({ length: world }, (_, r) => r);
  const b = new PlanBuilder({ name: `${p.name}-commir`, mesh: facts.mesh });
  let claim: Claim | undefined;
  for (const f of facts.buffers) {
    b.tensor(f.tensor);
    if (f.role === "read") {
      ranks.forEach((r) => b.local(r, f.held[r]!));
      if (f.comm === "ring") ringPasses(b, facts, f);
      else if (f.comm === "broadcast") broadcastPulls(b, f);
      else if (f.comm === "all-gather") gather(b, f);
      else if (f.comm === "p2p") pullFromOwners(b, f);
      const whole = f.needed.every((n) => n.sizes.every((s, d) => s === f.tensor.shape[d]));
      if (
        claim === undefined &&
        (f.comm === "ring" || f.comm === "broadcast" || f.comm === "all-gather") &&
        f.group.every((g) => g.length === world) &&
        whole
      ) {
        const cut = f.tensor.shape.flatMap((s, dim) => (f.held[0]!.sizes[dim] !== s ? [dim] : []));
        const d = cut[0] ?? -1;
        if (cut.length === 1 && f.tensor.shape[d]! % world === 0) claim = { collective: "all-gather", tensor: f.buffer, axis: d, ranks };
      }
      continue;
    }
    if (f.comm === "local") continue;
    const partial = { ...f.tensor, name: partialOutput(f.buffer) };
    b.tensor(partial);
    for (const r of ranks) {
      const src = { ...f.held[r]!, tensor: partial.name };
      b.local(r, src);
      const kind = f.comm === "reduce-scatter" ? "reduce-scatter" : "all-reduce";
      const axis = f.dim ?? 0;
      b.add(
        r,
        0,
        collective(kind, [...f.group[r]!], axis, src, f.needed[r]!, {
          reduce: p.reduce,
          deps: [computeDep(r, src)],
          label: `${kind} ${f.buffer}`,
        }),
      );
    }
    const whole = f.held.every((h) => h.sizes.every((s, d) => s === f.tensor.shape[d]));
    if (claim === undefined && whole && f.group.every((g) => g.length === world)) {
      claim = {
        collective: f.comm === "reduce-scatter" ? "reduce-scatter" : "all-reduce",
        tensor: f.buffer,
        src: partial.name,
        axis: f.dim ?? 0,
        ranks,
        reduce: p.reduce,
      };
    }
  }
  if (claim !== undefined) b.claim(claim);
  return { facts, plan: b.build() };
}

/**
 * Ring passes for a buffer read under shifted loops. At step s (a vector over the shifted
 * loops, lexicographic) rank c needs the block of rank c + s (per level, mod its size). Let
 * m be the innermost shifted loop with s_m > 0: neighbour c + e_m held that block at its
 * step s - e_m, so c pulls it from there, after that step's pull (a chain around the ring,
 * so only two blocks are live per rank: the double buffer of the memory estimate).
 */
function ringPasses(b: PlanBuilder, facts: ProgramFacts, f: BufferFacts): void {
  const ring = f.ring!;
  const { mesh } = facts;
  const refs = new Map<string, OpRef>();
  for (const s of ringSteps(ring)) {
    const m = s.findLastIndex((x) => x > 0);
    if (m < 0) continue;
    for (let r = 0; r < f.held.length; r++) {
      const from = meshCoords(r, mesh);
      const level = ring[m]!.level;
      from[level] = (from[level]! + 1) % mesh.shape[level]!;
      const peer = rankOf(from, mesh);
      const prev = [...s];
      prev[m] = prev[m]! - 1;
      const dep = refs.get(`${peer}:${prev.join(",")}`);
      const block = f.held[ringOwner(mesh, ring, r, s)]!;
      refs.set(
        `${r}:${s.join(",")}`,
        b.add(r, 0, pull(peer, block, block, { deps: dep ? [dep] : [], label: `ring ${f.buffer} step ${s.join(".")}` })),
      );
    }
  }
}

/** Broadcast as P2P: at step t every rank pulls the block of that step's owner (its own block needs nothing). */
function broadcastPulls(b: PlanBuilder, f: BufferFacts): void {
  f.broadcast!.owners.forEach((row, r) => {
    for (const q of row) if (q !== r) b.add(r, 0, pull(q, f.held[q]!, f.held[q]!, { label: `broadcast ${f.buffer} from ${q}` }));
  });
}

function gather(b: PlanBuilder, f: BufferFacts): void {
  f.group.forEach((g, r) => {
    const d = f.needed[r]!.sizes.findIndex((s, dim) => s !== f.held[r]!.sizes[dim]);
    b.add(r, 0, collective("all-gather", [...g], Math.max(0, d), f.held[r]!, f.needed[r]!, { label: `all-gather ${f.buffer}` }));
  });
}

/** Fallback (Mercury: "otherwise fall back to point-to-point"): pull each missing piece from an owner, least-loaded first. */
function pullFromOwners(b: PlanBuilder, f: BufferFacts): void {
  const load = f.held.map(() => 0);
  f.group.forEach((g, r) => {
    let missing = subtract(f.needed[r]!, f.held[r]!);
    const owners = g.filter((q) => q !== r).sort((x, y) => load[x]! - load[y]! || x - y);
    for (const q of owners) {
      const next: Region[] = [];
      for (const piece of missing) {
        const part = intersect(piece, f.held[q]!);
        if (part === undefined) {
          next.push(piece);
          continue;
        }
        b.add(r, 0, pull(q, part, part, { label: `pull ${f.buffer}` }));
        load[q] = load[q]! + regionVolume(part);
        next.push(...subtract(piece, f.held[q]!));
      }
      missing = next;
    }

    if (missing.length > 0) throw new FrontendError("unsupported-schedule", `buffer ${f.buffer}: rank ${r} reads data no rank holds`);
  });
}
