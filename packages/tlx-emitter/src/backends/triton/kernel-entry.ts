// The manifest entry of a transformed local kernel: the body's own parameters bound to
// buffers, sizes and constexprs, then the parameters the transformation inserted (tables,
// signals, the bounded wait's arguments), each given the manifest argument it reads.
import type { Kernel, KernelArg, GridDim, TileProgramSpec } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import type { Binding } from "../../core/bind.js";

/** What the transformation produced, as the manifest entry needs it (`LocalKernelOutput`). */
export interface TransformedKernel {
  readonly entry: string;
  /** Every parameter of the transformed kernel, in order. */
  readonly params: readonly string[];
  /** Those declared `tl.constexpr`. */
  readonly constexprs: readonly string[];
}

/** A manifest entry for `k`, whose every parameter is bound by `own` or `inserted`. */
export function localKernelEntry(
  k: TransformedKernel,
  e: {
    readonly name: string;
    readonly kind: string;
    readonly stream: "compute" | "comm";
    readonly grid: GridDim[];
    readonly numWarps: number;
    readonly numStages: number;
    readonly own: ReadonlyMap<string, Binding>;
    readonly inserted: Readonly<Record<string, KernelArg>>;
    readonly params: Readonly<Record<string, number | string | boolean>>;
    readonly tileProgram: TileProgramSpec;
  },
): Kernel {
  const args: { name: string; value: KernelArg }[] = [];
  const constexprs: Record<string, number | boolean> = {};
  for (const name of k.params) {
    const p = { name, constexpr: k.constexprs.includes(name) };
    const inserted = e.inserted[name];
    const b: Binding | undefined = e.own.get(name) ?? (inserted === undefined ? undefined : { kind: "arg", arg: inserted });
    if (b === undefined) throw new EmitError("bad-manifest", `kernel ${e.name}: parameter ${name} has no value`);
    if (b.kind === "constexpr") {
      if (!p.constexpr)
        throw new EmitError("bad-param", `kernel ${e.name}: ${p.name} is bound to a constexpr but is not declared tl.constexpr`);
      constexprs[p.name] = b.value;
    } else if (p.constexpr && b.arg.kind !== "num-programs") {
      // A constexpr takes a value known when the manifest is written.
      if (b.arg.kind !== "int")
        throw new EmitError("bad-param", `kernel ${e.name}: constexpr ${p.name} cannot take a run-time ${b.arg.kind}`);
      constexprs[p.name] = b.arg.value;
    } else {
      args.push({ name: p.name, value: b.arg });
    }
  }
  return {
    name: e.name,
    source: `${e.name}.py`,
    entry: k.entry,
    stream: e.stream,
    grid: e.grid,
    numWarps: e.numWarps,
    numStages: e.numStages,
    args,
    constexprs,
    template: { kind: e.kind, params: { ...e.params } },
    tileProgram: e.tileProgram,
  };
}
