// The hand-designed multi-GPU operators of Mercury Table 1 and §5, written as CommIR
// schedules over two base operators: attention reduced to a scaled accumulation (Fig. 7)
// and GEMM. The search (search.ts) must contain each of them.
import type { DType } from "@ovl/chunk-plan";
import { axis, type Program, program } from "../commir/ir.js";
import { parallelize, shift, tile } from "../commir/transforms.js";

/** Sizes of an attention operator: query heads, KV heads (GQA when fewer), query and context lengths. */
export interface AttentionShape {
  readonly heads: number;
  readonly kvHeads?: number;
  readonly query: number;
  readonly context: number;
  readonly dtype?: DType;
}

/**
 * Attention as Mercury's scaled accumulation (Fig. 7 ❶): `O[h, i] += P[h, i, j] · KV[h / g, j]`
 * with spatial axes h (heads), i (query) and reduction axis j (context); `P` stands for the
 * pre-softmax scores, `KV` for the key/value activations shared by `g = heads / kvHeads` heads.
 */
export function attentionProgram(s: AttentionShape): Program {
  const kv = s.kvHeads ?? s.heads;
  return program({
    name: "attention",
    axes: [axis("h", s.heads, "s"), axis("i", s.query, "s"), axis("j", s.context, "r")],
    buffers: [
      { name: "P", dims: ["h", "i", "j"] },
      { name: "KV", dims: [kv === s.heads ? "h" : { axes: ["h"], scale: s.heads / kv }, "j"] },
      { name: "O", dims: ["h", "i"] },
    ],
    output: "O",
    inputs: ["P", "KV"],
    ...(s.dtype === undefined ? {} : { dtype: s.dtype }),
  });
}

/** GEMM `C[m, n] += A[m, k] · B[k, n]`. */
export function gemmProgram(m: number, n: number, k: number, dtype?: DType): Program {
  return program({
    name: "gemm",
    axes: [axis("m", m, "s"), axis("n", n, "s"), axis("k", k, "r")],
    buffers: [
      { name: "A", dims: ["m", "k"] },
      { name: "B", dims: ["k", "n"] },
      { name: "C", dims: ["m", "n"] },
    ],
    output: "C",
    inputs: ["A", "B"],
    ...(dtype === undefined ? {} : { dtype }),
  });
}

function extentOf(p: Program, loop: string): number {
  return p.loops.find((l) => l.name === loop)!.extent;
}

/** Tiles `loop` so its outer part has `n` iterations and returns the program and the outer loop's name. */
export function tileOuter(p: Program, loop: string, n: number): { program: Program; outer: string; inner: string } {
  const outer = `${loop}0`;
  const inner = `${loop}1`;
  return { program: tile(p, loop, extentOf(p, loop) / n, [outer, inner]), outer, inner };
}

/** RingAttention [27]: query parallel over the mesh, KV passed around a ring (shift of the context loop). */
export function ringAttention(p: Program, ranks: number): Program {
  const q = tileOuter(p, "i", ranks);
  const c = tileOuter(parallelize(q.program, q.outer, 0), "j", ranks);
  return shift(c.program, c.outer, q.outer);
}

/** DeepSpeed-Ulysses [20]: head parallelism, no communication inside the operator. */
export function ulyssesAttention(p: Program, ranks: number): Program {
  const h = tileOuter(p, "h", ranks);
  return parallelize(h.program, h.outer, 0);
}

/** USP [15]: heads parallel across the outer mesh level (Ulysses), a KV ring on the inner level. */
export function uspAttention(p: Program, mesh: readonly [number, number]): Program {
  const h = tileOuter(p, "h", mesh[0]);
  const q = tileOuter(parallelize(h.program, h.outer, 0), "i", mesh[1]);
  const c = tileOuter(parallelize(q.program, q.outer, 1), "j", mesh[1]);
  return shift(c.program, c.outer, q.outer);
}

/** Tree attention [44]: the context (reduction) loop parallel; partial outputs all-reduced. */
export function treeAttention(p: Program, ranks: number): Program {
  const c = tileOuter(p, "j", ranks);
  return parallelize(c.program, c.outer, 0);
}

/** AsyncTP [51] (AllGather-GEMM): N parallel (column-parallel weights), row blocks of A passed around a ring (shift of M). */
export function asyncTpGemm(p: Program, ranks: number): Program {
  const n = tileOuter(p, "n", ranks);
  const m = tileOuter(parallelize(n.program, n.outer, 0), "m", ranks);
  return shift(m.program, m.outer, n.outer);
}

/** Which logical axis each parallel and shifted loop of `p` comes from, per mesh level: a schedule's shape. */
export interface ScheduleSignature {
  readonly parallel: Readonly<Record<number, string>>;
  readonly shifts: Readonly<Record<number, string>>;
}

/** The {@link ScheduleSignature} of `p`. */
export function signature(p: Program): ScheduleSignature {
  const parallel: Record<number, string> = {};
  const shifts: Record<number, string> = {};
  for (const l of p.loops) {
    if (l.parallel) parallel[l.parallel.level] = l.origin.join("*");
    if (l.shift) shifts[p.loops.find((x) => x.name === l.shift!.by)!.parallel!.level] = l.origin.join("*");
  }
  return { parallel, shifts };
}
