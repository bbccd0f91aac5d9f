// Parsing a user's annotated local kernel into what the transformation needs: the kept module
// parts and the kernel's shape, every safety rule checked, so a parsed kernel is one that can
// be transformed (a tile program may still be refused).
import { readAnnotations } from "./annotations.js";
import { LocalKernelError } from "./errors.js";
import { kernelShape, type KernelShape, type LocalParam } from "./kernel.js";
import { identifiersOf, jitFunction, moduleParts, type ModuleParts } from "./module.js";
import { checkSyntax, field, lineOf, loadPythonParser, syntaxTree, walk, type PythonParser } from "./parser.js";
import { checkKernelSafety } from "./safety.js";

/** The device primitives the inserted code calls; the kernel's code must not use these names. */
export const PRIMITIVES = ["wait_slot", "consume_token", "notify_slot"] as const;

/** A parsed, checked local kernel (input of `transformLocalKernel`). */
export interface LocalKernel {
  /** File name used in messages and in the emitted docstring. */
  file: string;
  source: string;
  /** The annotated kernel's name. */
  entry: string;
  role: "consumer" | "producer";
  /** The gathered (consumer) or scattered (producer) parameter. */
  operand: string;
  /** The index table a consumer gathers its rows through, or a producer scatters them through (`rows=<table>`), if any. */
  rows?: string;
  /** The input a producer reads in the index table's block order (`blocks=<param>`), if any. */
  blocks?: string;
  /**
   * Whether the tile loop is warp-specialised by Triton (`warp_specialize=True`). Triton 3.6's
   * Hopper warp specialisation drops or duplicates atomics inside such a loop and hoists them
   * from after it, so nothing is inserted into it: the operator signals per launch.
   */
  warpSpecialized: boolean;
  params: readonly LocalParam[];
  /** Whether the kernel has a `# ovl: tile-loop` (persistent) or one program is one tile. */
  persistent: boolean;
  /** Where a consumer waits: per tile (`# ovl: tile m=`) or per kv block of an inner loop (`# ovl: tile kv=`). */
  waitsPer: "tile" | "kv-block";
  /** Every identifier of the kept code (imports and jit functions). */
  identifiers: ReadonlySet<string>;
  /** @internal Syntax of the kept parts; the transformation splices around these nodes. */
  readonly parts: ModuleParts;
  /** @internal */
  readonly shape: KernelShape;
}

/** Options of {@link parseLocalKernel}. */
export interface ParseLocalKernelOptions {
  /** Name of the file in messages (default "kernel.py"). */
  file?: string;
  /** The kernel's expected name: refused (`no-annotation`) when the annotated kernel has another. */
  entry?: string;
}

/** Parses and checks `source` with a loaded parser. Throws {@link LocalKernelError}. */
export function parseLocalKernelWith(parser: PythonParser, source: string, options: ParseLocalKernelOptions = {}): LocalKernel {
  const file = options.file ?? "kernel.py";
  const root = syntaxTree(parser.parse(source)).rootNode;
  checkSyntax(root, file);
  const parts = moduleParts(root, file);
  const annotations = readAnnotations(root, file);
  const shape = kernelShape(root, source, annotations, file);
  if (options.entry !== undefined && options.entry !== shape.entry) {
    throw new LocalKernelError(
      "no-annotation",
      file,
      lineOf(shape.func),
      `the annotated kernel is ${shape.entry}, not ${JSON.stringify(options.entry)}`,
    );
  }
  const kept = [...parts.imports, ...parts.functions];
  const identifiers = identifiersOf(kept);
  checkNames(kept, file);
  if (!parts.languageAliases.has("tl")) {
    throw new LocalKernelError("bad-import", file, 0, 'the kernel module must import triton.language as tl (the inserted code uses "tl.")');
  }
  const helpers = new Set(
    parts.functions.map((d) => jitFunction(d)).flatMap((f) => (f === undefined ? [] : [field(f, "name")?.text ?? ""])),
  );
  helpers.delete(shape.entry);
  checkKernelSafety(shape, helpers, file);
  return {
    file,
    source,
    entry: shape.entry,
    role: shape.role,
    operand: shape.operand,
    ...(shape.rows === undefined ? {} : { rows: shape.rows }),
    ...(shape.blocks === undefined ? {} : { blocks: shape.blocks }),
    warpSpecialized: shape.warpSpecialized,
    params: shape.params,
    persistent: shape.tileLoop !== undefined,
    waitsPer: shape.kvStatements.length > 0 ? "kv-block" : "tile",
    identifiers,
    parts,
    shape,
  };
}

/**
 * Parses and checks `source`, loading the shared parser first. `options` may be given as the
 * file name and expected entry. Throws {@link LocalKernelError}.
 */
export async function parseLocalKernel(
  source: string,
  options: ParseLocalKernelOptions | string = {},
  entry?: string,
): Promise<LocalKernel> {
  const o = typeof options === "string" ? { file: options, ...(entry === undefined ? {} : { entry }) } : options;
  return parseLocalKernelWith(await loadPythonParser(), source, o);
}

/** The inserted names start with `ovl_` and call the primitives: the kernel may use neither. */
function checkNames(kept: readonly import("./parser.js").SyntaxNode[], file: string): void {
  for (const node of kept) {
    for (const n of walk(node)) {
      if (n.type !== "identifier") continue;
      if (n.text.startsWith("ovl_")) {
        throw new LocalKernelError(
          "name-collision",
          file,
          lineOf(n),
          `${n.text}: names starting with ovl_ are reserved for the code ovl inserts`,
        );
      }
      if ((PRIMITIVES as readonly string[]).includes(n.text)) {
        throw new LocalKernelError(
          "name-collision",
          file,
          lineOf(n),
          `${n.text} is the name of an ovl device primitive the inserted code imports`,
        );
      }
    }
  }
}
