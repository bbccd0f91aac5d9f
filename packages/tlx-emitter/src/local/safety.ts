// The safety rules of the transformation: inserted waits and notifies are only correct if every
// tile runs them (no early exit), every write of a tile coordinate is remapped, a consumer reads
// the gathered operand only after its wait, and a producer writes its output only before its notify.
import { LocalKernelError } from "./errors.js";
import type { KernelShape } from "./kernel.js";
import { kvReadRange } from "./kv-block.js";
import { assignedNames, field, lineOf, named, walk, type SyntaxNode } from "./parser.js";

const LOOPS = new Set(["for_statement", "while_statement"]);

/** Runs every check; throws the first violation in source order of the checks. */
export function checkKernelSafety(shape: KernelShape, helpers: ReadonlySet<string>, file: string): void {
  checkExits(shape, file);
  checkTileAssignments(shape, file);
  checkOperandAccess(shape, helpers, file);
}

/**
 * No return anywhere in the tile, no break/continue that leaves the tile loop's iteration. One
 * exception: a non-persistent consumer may return before its first tile statement (a program
 * past the last valid tile exiting at once, as fused-MoE kernels do), since such a program has
 * waited on nothing and reads nothing; a producer may not, as its notify would never come.
 */
function checkExits(shape: KernelShape, file: string): void {
  const first = shape.tileStatements[0]?.node;
  const earlyExitAllowed = shape.role === "consumer" && shape.tileLoop === undefined && first !== undefined;
  for (const node of walk(shape.tileBlock)) {
    if (node.type === "return_statement") {
      if (earlyExitAllowed && node.endIndex <= first.startIndex) continue;
      throw new LocalKernelError("unsafe-tile-loop", file, lineOf(node), "return inside the tile would skip the inserted wait or notify");
    }
    if (node.type !== "break_statement" && node.type !== "continue_statement") continue;
    let up = node.parent;
    while (up !== null && up.id !== shape.tileBlock.id && !LOOPS.has(up.type)) up = up.parent;
    // Reaching the tile block means the innermost loop is the tile loop (or there is none).
    if (up === null || up.id === shape.tileBlock.id) {
      const word = node.type === "break_statement" ? "break" : "continue";
      throw new LocalKernelError(
        "unsafe-tile-loop",
        file,
        lineOf(node),
        `${word} at the tile level would skip the rest of the tile (its wait or notify)`,
      );
    }
  }
}

/** Targets of every binding construct: assignments, augmented assignments, for targets, walrus. */
function bindings(root: SyntaxNode): { node: SyntaxNode; names: string[]; value?: SyntaxNode }[] {
  const out: { node: SyntaxNode; names: string[]; value?: SyntaxNode }[] = [];
  const targets = (n: SyntaxNode | undefined): string[] =>
    n === undefined
      ? []
      : [...walk(n)]
          .filter((i) => i.type === "identifier" && i.parent?.type !== "attribute" && i.parent?.type !== "subscript")
          .map((i) => i.text);
  for (const node of walk(root)) {
    const value = field(node, "right") ?? field(node, "value");
    if (node.type === "assignment") {
      if (node.parent?.type !== "assignment") out.push({ node, names: assignedNames(node), ...(value ? { value } : {}) });
    } else if (node.type === "augmented_assignment" || node.type === "for_statement" || node.type === "for_in_clause") {
      out.push({ node, names: targets(field(node, "left")), ...(value ? { value } : {}) });
    } else if (node.type === "named_expression") {
      out.push({ node, names: targets(field(node, "name")), ...(value ? { value } : {}) });
    }
  }
  return out;
}

/** Every write of a tile variable inside the tile must be an annotated tile statement. */
function checkTileAssignments(shape: KernelShape, file: string): void {
  const vars = new Set([
    ...shape.tileStatements.flatMap((t) => (t.n === undefined ? [t.m] : [t.m, t.n])),
    ...shape.kvStatements.map((s) => s.kv),
  ]);
  const annotated = new Set([...shape.tileStatements, ...shape.kvStatements].map((t) => named(t.node)[0]?.id));
  for (const b of bindings(shape.tileBlock)) {
    const hit = b.names.find((n) => vars.has(n));
    if (hit !== undefined && !annotated.has(b.node.id)) {
      throw new LocalKernelError(
        "unsafe-tile-loop",
        file,
        lineOf(b.node),
        `${hit} is a tile variable but this assignment has no "# ovl: tile" annotation, so the remap would not reach it`,
      );
    }
  }
}

function mentions(node: SyntaxNode, names: ReadonlySet<string>): boolean {
  for (const n of walk(node)) {
    // `f(x=...)`: the keyword is not a use of a variable x.
    const keyword = n.parent?.type === "keyword_argument" && field(n.parent, "name")?.id === n.id;
    if (n.type === "identifier" && names.has(n.text) && !keyword) return true;
  }
  return false;
}

/** Names derived from the operand: assigned from an expression mentioning it, transitively. */
export function taintedNames(func: SyntaxNode, operand: string): Set<string> {
  const tainted = new Set([operand]);
  const all = bindings(func);
  for (let changed = true; changed; ) {
    changed = false;
    for (const b of all) {
      if (b.value === undefined || !mentions(b.value, tainted)) continue;
      for (const n of b.names)
        if (!tainted.has(n)) {
          tainted.add(n);
          changed = true;
        }
    }
  }
  return tainted;
}

const LOADS = new Set(["tl.load", "tl.load_tensor_descriptor", "tl._experimental_descriptor_load"]);
const STORES = new Set([
  "tl.store",
  "tl.store_tensor_descriptor",
  "tl._experimental_descriptor_store",
  "tl.atomic_add",
  "tl.atomic_xchg",
  "tl.atomic_max",
  "tl.atomic_min",
  "tl.atomic_cas",
  "tl.atomic_and",
  "tl.atomic_or",
  "tl.atomic_xor",
]);

/** How a call touches the operand: a read, a write, or a helper that may do either. */
function access(call: SyntaxNode, tainted: ReadonlySet<string>, helpers: ReadonlySet<string>): string | undefined {
  const fn = field(call, "function");
  const args = field(call, "arguments");
  if (fn === undefined) return undefined;
  if (fn.type === "attribute") {
    const object = field(fn, "object");
    const method = field(fn, "attribute")?.text;
    if (object?.type === "identifier" && tainted.has(object.text) && (method === "load" || method === "store")) return method;
  }
  if (args === undefined || !mentions(args, tainted)) return undefined;
  if (LOADS.has(fn.text)) return "load";
  if (STORES.has(fn.text)) return "store";
  if (fn.type === "identifier" && helpers.has(fn.text)) return "helper";
  return undefined;
}

/**
 * A consumer's reads of the gathered operand, and a producer's writes of the scattered one,
 * must happen inside the tile after its first tile statement: that is where the wait is, and
 * the notify at the tile's end covers only stores made inside the tile.
 */
function checkOperandAccess(shape: KernelShape, helpers: ReadonlySet<string>, file: string): void {
  if (shape.kvStatements.length > 0) {
    checkKvAccess(shape, helpers, file);
    return;
  }
  const tainted = taintedNames(shape.func, shape.operand);
  const first = shape.tileStatements[0]?.node as SyntaxNode;
  const want = shape.role === "consumer" ? "load" : "store";
  for (const call of walk(shape.func)) {
    if (call.type !== "call") continue;
    const kind = access(call, tainted, helpers);
    if (kind === undefined || (kind !== want && kind !== "helper")) continue;
    const inside = call.startIndex >= first.endIndex && call.endIndex <= shape.tileBlock.endIndex;
    if (inside) continue;
    const where =
      shape.tileLoop !== undefined && call.startIndex >= shape.tileBlock.startIndex && call.endIndex <= shape.tileBlock.endIndex
        ? `before the first tile statement (line ${lineOf(first)})`
        : shape.tileLoop !== undefined
          ? "outside the tile loop"
          : `before the tile statement (line ${lineOf(first)})`;
    const what =
      kind === "helper"
        ? `${field(call, "function")?.text ?? "a helper"}(...) is passed ${shape.operand} (or a value derived from it) ${where}`
        : `${kind} of ${shape.operand} (or a value derived from it) ${where}`;
    const why =
      shape.role === "consumer"
        ? "its rows may not have arrived: loads must follow the tile's wait"
        : "the tile's notify would not cover it";
    throw new LocalKernelError(shape.role === "consumer" ? "unsafe-load" : "unsafe-store", file, lineOf(call), `${what}; ${why}`);
  }
}

/** A kv-loop consumer reads the gathered operand only inside a kv loop, after the iteration's wait. */
function checkKvAccess(shape: KernelShape, helpers: ReadonlySet<string>, file: string): void {
  const tainted = taintedNames(shape.func, shape.operand);
  const ranges = shape.kvStatements.map(kvReadRange);
  for (const call of walk(shape.func)) {
    if (call.type !== "call") continue;
    const kind = access(call, tainted, helpers);
    if (kind === undefined || (kind !== "load" && kind !== "helper")) continue;
    if (ranges.some((r) => call.startIndex >= r.start && call.endIndex <= r.end)) continue;
    const what =
      kind === "helper"
        ? `${field(call, "function")?.text ?? "a helper"}(...) is passed ${shape.operand} (or a value derived from it)`
        : `load of ${shape.operand} (or a value derived from it)`;
    throw new LocalKernelError(
      "unsafe-load",
      file,
      lineOf(call),
      `${what} outside a kv loop's waited part (after its "# ovl: tile kv=" statement, inside the if that guards the block if there is one); its rows may not have arrived`,
    );
  }
}
