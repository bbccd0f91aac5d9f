// The CommIR interpreter: evaluates a program's global semantics on small integer tensors
// (every loop, parallel ones included, as a plain loop), so tests can check that schedule
// transforms and lowering preserve what the loop program computes.
import { FrontendError } from "../errors.js";
import { evalExpr } from "./expr.js";
import { bufferOf, bufferShape, dimIndex, loopOf, type Loop, type Program } from "./ir.js";

/** Values of a buffer, row-major over its shape. */
export type Tensor = readonly number[];

/**
 * What a patched kernel sees: the points of its block (logical axis values), reads of
 * input buffers and accumulation into the output, both at logical coordinates.
 */
export interface KernelContext {
  readonly points: () => Iterable<Readonly<Record<string, number>>>;
  readonly read: (buffer: string, logical: Readonly<Record<string, number>>) => number;
  readonly accumulate: (logical: Readonly<Record<string, number>>, value: number) => void;
  readonly inputs: readonly string[];
}

/** A patched kernel's implementation (opaque to the schedule, real to the interpreter). */
export type PatchKernel = (ctx: KernelContext) => void;

/** The reference kernel every patch defaults to: the grid's own multiply-accumulate over the block. */
export const macKernel: PatchKernel = (ctx) => {
  for (const pt of ctx.points())
    ctx.accumulate(
      pt,
      ctx.inputs.reduce((acc, b) => acc * ctx.read(b, pt), 1),
    );
};

/** Flat offset of a buffer element given logical axis values. */
export function flatIndex(p: Program, buffer: string, logical: Readonly<Record<string, number>>): number {
  const b = bufferOf(p, buffer);
  const shape = bufferShape(p, b);
  return b.dims.reduce((acc, d, i) => acc * shape[i]! + dimIndex(p, d, logical), 0);
}

/** Every assignment of `loops`' variables, outermost varying slowest, extending `base`. */
export function* loopPoints(loops: readonly Loop[], base: Readonly<Record<string, number>> = {}): Generator<Record<string, number>> {
  const env: Record<string, number> = { ...base };
  const free = loops.filter((l) => base[l.name] === undefined);
  if (free.some((l) => l.extent < 1)) return;
  const idx = free.map(() => 0);
  for (;;) {
    free.forEach((l, i) => (env[l.name] = idx[i]!));
    yield { ...env };
    let k = free.length - 1;
    while (k >= 0 && ++idx[k]! === free[k]!.extent) idx[k--] = 0;
    if (k < 0) return;
  }
}

/** Logical axis values at a loop point. */
export function logicalAt(p: Program, env: Readonly<Record<string, number>>): Record<string, number> {
  return Object.fromEntries(p.axes.map((a) => [a.name, evalExpr(p.bindings[a.name]!, env)]));
}

/** Options of {@link interpret}. */
export interface InterpretOptions {
  /** Implementations of patched kernels by name (default: {@link macKernel} for any name). */
  readonly kernels?: Readonly<Record<string, PatchKernel>>;
  /** Restrict parallel loops to these values (one rank's share); default all. */
  readonly fixed?: Readonly<Record<string, number>>;
  /** Reads go here instead of `inputs` (a rank's local buffers); `undefined` elements throw. */
  readonly read?: (buffer: string, flat: number) => number;
  /** Output accumulator to add into (default fresh zeros, or -Infinity for max). */
  readonly into?: number[];
}

/**
 * Evaluates `p` on `inputs` (row-major arrays per input buffer) and returns the output.
 * `out[...] += Π ins[...]` (or `max=`) over every loop point; a patch calls its kernel once
 * per point of the loops outside it.
 */
export function interpret(p: Program, inputs: Readonly<Record<string, Tensor>>, o: InterpretOptions = {}): number[] {
  const outShape = bufferShape(p, bufferOf(p, p.output));
  const out = o.into ?? new Array<number>(outShape.reduce((a, b) => a * b, 1)).fill(p.reduce === "sum" ? 0 : -Infinity);
  const read =
    o.read ??
    ((buffer: string, flat: number): number => {
      const x = inputs[buffer]?.[flat];
      if (x === undefined) throw new FrontendError("execution", `input ${buffer} has no element ${flat}; pass a full row-major array`);
      return x;
    });
  const ctxRead = (b: string, logical: Readonly<Record<string, number>>): number => read(b, flatIndex(p, b, logical));
  const accumulate = (logical: Readonly<Record<string, number>>, value: number): void => {
    const i = flatIndex(p, p.output, logical);
    out[i] = p.reduce === "sum" ? out[i]! + value : Math.max(out[i]!, value);
  };
  const split = p.patch === undefined ? p.loops.length : loopOf(p, p.patch.from).index;
  const outer = p.loops.slice(0, split);
  const inner = p.loops.slice(split);
  const kernel: PatchKernel =
    p.patch === undefined ? macKernel : (o.kernels?.[p.patch.kernel] ?? (o.kernels === undefined ? macKernel : missing(p.patch.kernel)));
  for (const env of loopPoints(outer, o.fixed ?? {})) {
    kernel({
      inputs: p.inputs,
      read: ctxRead,
      accumulate,
      points: function* () {
        for (const full of loopPoints(inner, env)) yield logicalAt(p, full);
      },
    });
  }
  return out;
}

function missing(name: string): never {
  throw new FrontendError("unknown-kernel", `no implementation of patched kernel ${name} was given; add it to options.kernels`);
}
