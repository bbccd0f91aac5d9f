// The operator registry's contract: what one operator folder declares about itself (its name,
// summary, command-line options as plain data, compute defaults, Triton and TLX realisations),
// so that compile(), the tuned configurations and the `ovl emit <operator>` subcommands read it.
import type { BuiltinBodyName } from "./builtin.js";
import type { Operator, OperatorInput, OperatorKind } from "./operator.js";
import type { EmitResult } from "./result.js";

/** One operator-specific command-line option, as plain data (the CLI turns it into a flag). */
export interface OptionDeclaration {
  /** Long flag without its dashes, e.g. `head-dim` for `--head-dim`. */
  readonly name: string;
  /** `positive-int` and `string` take a value (named by `value`, e.g. `<D>`); a `switch` takes none. */
  readonly type: "positive-int" | "string" | "switch";
  /** Placeholder of the value in help, e.g. `<D>`; absent for a switch. */
  readonly value?: string;
  readonly help: string;
  /** Documented default (the operator applies it; the CLI only shows it). */
  readonly default?: string | number | boolean;
}

/**
 * Options several operators share, declared once by the CLI: the named MLP shape, the explicit
 * GEMM sizes `--m --n --k`, the element type `--dtype` (one of `OPERATOR_DTYPES`; every
 * operator `ovl emit` offers takes it), the mesh, the plan template and its knobs, the tile, the tuned
 * table's target, the TLX backend, a user's kernel or plan file, the push kernel's SMs, and the
 * rest of a compute configuration beside the tile (warps, pipeline stages, the built-in body
 * variant), which an on-device tuner names to compile one candidate exactly.
 */
export const SHARED_OPTIONS = [
  "shape",
  "gemm-sizes",
  "dtype",
  "world",
  "mesh",
  "template",
  "side",
  "split",
  "backend",
  "tile",
  "group-m",
  "sms",
  "target",
  "tlx",
  "kernel",
  "plan",
  "comm-sms",
  "num-warps",
  "num-stages",
  "body",
] as const;
/** A shared option's name. */
export type SharedOption = (typeof SHARED_OPTIONS)[number];

/** How `ovl emit <operator>` presents an operator: its own options, the shared ones it takes, examples. */
export interface OperatorCli {
  readonly options: readonly OptionDeclaration[];
  readonly shared: readonly SharedOption[];
  /** With the shared `template` option: the plan templates it takes, its default first. */
  readonly templates?: readonly string[];
  /** Complete command lines, shown under `--help`. */
  readonly examples: readonly string[];
}

/** The tile of an operator that names none and has no tuned entry, or why it has none. */
export interface OperatorCompute {
  /** Whether the tuned tables hold configurations of this operator (`configs/<target>.json`). */
  readonly tuned: boolean;
  /** ovl's built-in bodies that compute this operator's GEMM: the variants a tuned entry may swap in. */
  readonly bodies?: readonly BuiltinBodyName[];
  /** The untuned tile. @throws {EmitError} where the operator must name its tile. */
  defaultTile(op: OperatorInput): { readonly BM: number; readonly BN: number; readonly BK: number };
}

/** Options the TLX realisation of an operator receives from `tlxBackend`. */
export interface TlxRealiseOptions {
  /** AllGather+GEMM transport: host copies (`copy-engine`, default) or the in-kernel communication task. */
  readonly comm?: "copy-engine" | "comm-task";
}

/** One registry entry: everything about an operator that is not its kernels' text. */
export interface OperatorDefinition {
  /** The name `ovl emit` takes (an `OperatorKind`, or a chain of them such as `mlp`). */
  readonly name: string;
  /** One line for help and docs. */
  readonly summary: string;
  /** The compiled kind; absent for a chain of operators (its stages have kinds). */
  readonly kind?: OperatorKind;
  /** Absent: not offered by `ovl emit` (its problem cannot be stated by flags). */
  readonly cli?: OperatorCli;
  /** Compute defaults; required with a `kind`. */
  readonly compute?: OperatorCompute;
  /** The Triton realisation (the operator's local body transformed); required with a `kind`. */
  realise?(op: Operator): Promise<EmitResult>;
  /** The TLX realisation (warp-specialised kernels from TLX parts), where one exists. */
  realiseTlx?(op: Operator, options: TlxRealiseOptions): Promise<EmitResult>;
  /** Realises the operator for any row count (`Operator.rows`); absent where the operator is compiled per M. */
  realiseRows?(op: Operator): Promise<EmitResult>;
}
