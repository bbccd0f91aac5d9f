// CommIR (Mercury §4.1, §7.1) as plain data: axes (named loop variables with an extent,
// spatial "s" or reduction "r"), buffers bound to axes, one grid computing
// `out[...] (+|max)= Π ins[...]`, and the loop nest the schedule primitives rewrite.
import type { DType } from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";
import { exprVars, type IndexExpr, v } from "./expr.js";

/** `s`: spatial (indexes the output); `r`: reduction (accumulated over). */
export type AxisKind = "s" | "r";

/** A logical axis of the operator: Mercury's `Axis`, a named loop variable with a static extent. */
export interface Axis {
  readonly name: string;
  readonly extent: number;
  readonly kind: AxisKind;
}

/**
 * One dimension of a buffer, bound to logical axes: the index is the row-major combination
 * of the axes' values (a tuple of axes sharing a dim), floor-divided by `scale` (GQA: the
 * KV head of query head h is `h / groups`).
 */
export interface DimBinding {
  readonly axes: readonly string[];
  readonly scale?: number;
}

/** A buffer bound to axes (Mercury's `match_buffer`). */
export interface BufferDecl {
  readonly name: string;
  readonly dims: readonly DimBinding[];
  readonly dtype: DType;
}

/** A loop of the nest. `parallel` maps it to a mesh level; `shift` offsets it by a parallel loop. */
export interface Loop {
  readonly name: string;
  readonly extent: number;
  readonly kind: AxisKind;
  /** The logical axes this loop iterates (kept through tile; joined loops list both). */
  readonly origin: readonly string[];
  readonly parallel?: { readonly level: number };
  readonly shift?: { readonly by: string };
}

/** A buffer cut along `dim` among the ranks of parallel loop `loop` (Mercury's `shard`). */
export interface ShardAnnotation {
  readonly loop: string;
  readonly dim: number;
}

/** Loops from `from` inward are one opaque kernel call (Mercury's `patch`, e.g. FlashAttention). */
export interface PatchAnnotation {
  readonly from: string;
  readonly kernel: string;
}

/** A CommIR program: the operator and its current schedule. Every transform returns a new one. */
export interface Program {
  readonly name: string;
  readonly axes: readonly Axis[];
  readonly buffers: readonly BufferDecl[];
  readonly output: string;
  readonly inputs: readonly string[];
  readonly reduce: "sum" | "max";
  /** Each logical axis's value as an expression over loop variables. */
  readonly bindings: Readonly<Record<string, IndexExpr>>;
  /** The loop nest, outermost first. */
  readonly loops: readonly Loop[];
  /** Per buffer, its shards; a buffer is replicated over every parallel loop it is not sharded on. */
  readonly shards: Readonly<Record<string, readonly ShardAnnotation[]>>;
  readonly patch?: PatchAnnotation;
}

/** What {@link program} takes: the operator as a user writes it. */
export interface ProgramInput {
  readonly name: string;
  readonly axes: readonly Axis[];
  /** Dims as axis names, tuples of names, or full bindings. */
  readonly buffers: readonly {
    readonly name: string;
    readonly dims: readonly (string | readonly string[] | DimBinding)[];
    readonly dtype?: DType;
  }[];
  readonly output: string;
  readonly inputs: readonly string[];
  readonly reduce?: "sum" | "max";
  /** Default `bf16`. */
  readonly dtype?: DType;
}

/** `axis(name, extent, kind)`: a logical axis. */
export const axis = (name: string, extent: number, kind: AxisKind = "s"): Axis => ({ name, extent, kind });

/**
 * Builds a program from the operator's axes, buffers and grid: one loop per axis in the
 * order given (spatial and reduction alike), every buffer replicated.
 */
export function program(p: ProgramInput): Program {
  const names = new Set<string>();
  for (const a of p.axes) {
    if (names.has(a.name)) throw new FrontendError("invalid-program", `axis ${a.name} is declared twice`);
    if (!Number.isSafeInteger(a.extent) || a.extent < 1)
      throw new FrontendError("invalid-program", `axis ${a.name} needs a positive integer extent, got ${a.extent}`);
    names.add(a.name);
  }
  const buffers: BufferDecl[] = p.buffers.map((b) => ({
    name: b.name,
    dtype: b.dtype ?? p.dtype ?? "bf16",
    dims: b.dims.map((d) =>
      typeof d === "string"
        ? { axes: [d] }
        : "axes" in d
          ? { axes: [...(d as DimBinding).axes], ...((d as DimBinding).scale === undefined ? {} : { scale: (d as DimBinding).scale! }) }
          : { axes: [...(d as readonly string[])] },
    ),
  }));
  const prog: Program = {
    name: p.name,
    axes: p.axes.map((a) => ({ ...a })),
    buffers,
    output: p.output,
    inputs: [...p.inputs],
    reduce: p.reduce ?? "sum",
    bindings: Object.fromEntries(p.axes.map((a) => [a.name, v(a.name)])),
    loops: p.axes.map((a) => ({ name: a.name, extent: a.extent, kind: a.kind, origin: [a.name] })),
    shards: Object.fromEntries(buffers.map((b) => [b.name, []])),
  };
  checkProgram(prog);
  return prog;
}

/** The declaration of buffer `name` (throws `unknown-buffer`). */
export function bufferOf(p: Program, name: string): BufferDecl {
  const b = p.buffers.find((x) => x.name === name);
  if (b === undefined)
    throw new FrontendError(
      "unknown-buffer",
      `program ${p.name} has no buffer ${name}; buffers: ${p.buffers.map((x) => x.name).join(", ")}`,
    );
  return b;
}

/** The loop named `name` and its position (throws `unknown-axis`). */
export function loopOf(p: Program, name: string): { loop: Loop; index: number } {
  const index = p.loops.findIndex((l) => l.name === name);
  if (index < 0)
    throw new FrontendError("unknown-axis", `program ${p.name} has no loop ${name}; loops: ${p.loops.map((l) => l.name).join(", ")}`);
  return { loop: p.loops[index]!, index };
}

/** The extent of buffer dimension `d` (product of its axes' extents, divided by its scale). */
export function dimExtent(p: Program, d: DimBinding): number {
  const prod = d.axes.reduce((acc, a) => acc * (p.axes.find((x) => x.name === a)?.extent ?? 0), 1);
  return Math.ceil(prod / (d.scale ?? 1));
}

/** The shape of buffer `b`. */
export function bufferShape(p: Program, b: BufferDecl): number[] {
  return b.dims.map((d) => dimExtent(p, d));
}

/** The loop variables buffer dimension `d`'s index reads. */
export function dimVars(p: Program, d: DimBinding): Set<string> {
  const out = new Set<string>();
  for (const a of d.axes) exprVars(p.bindings[a]!, out);
  return out;
}

/** Buffer dimension `d`'s index given the logical axes' values. */
export function dimIndex(p: Program, d: DimBinding, logical: Readonly<Record<string, number>>): number {
  let idx = 0;
  for (const a of d.axes) idx = idx * p.axes.find((x) => x.name === a)!.extent + logical[a]!;
  return Math.floor(idx / (d.scale ?? 1));
}

/** Checks references: buffers over declared axes, output and inputs declared, scales positive. */
export function checkProgram(p: Program): void {
  const axes = new Set(p.axes.map((a) => a.name));
  for (const b of p.buffers) {
    if (b.dims.length === 0) throw new FrontendError("invalid-program", `buffer ${b.name} needs at least one dimension`);
    for (const d of b.dims) {
      for (const a of d.axes)
        if (!axes.has(a))
          throw new FrontendError("unknown-axis", `buffer ${b.name} is bound to axis ${a}, which program ${p.name} does not declare`);
      if (d.scale !== undefined && (!Number.isSafeInteger(d.scale) || d.scale < 1))
        throw new FrontendError("invalid-program", `buffer ${b.name}: scale must be a positive integer`);
    }
  }
  for (const name of [p.output, ...p.inputs]) bufferOf(p, name);
  if (p.inputs.includes(p.output))
    throw new FrontendError("invalid-program", `buffer ${p.output} is both read and written; write a separate output`);
  const outAxes = new Set(bufferOf(p, p.output).dims.flatMap((d) => d.axes));
  for (const a of p.axes) {
    if (a.kind === "s" && !outAxes.has(a.name))
      throw new FrontendError(
        "invalid-program",
        `spatial axis ${a.name} does not index output ${p.output}; make it a reduction axis ("r")`,
      );
    if (a.kind === "r" && outAxes.has(a.name))
      throw new FrontendError("invalid-program", `reduction axis ${a.name} indexes output ${p.output}; make it spatial ("s")`);
  }
}
