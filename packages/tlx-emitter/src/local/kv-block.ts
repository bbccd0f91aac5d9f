// Waits inside an inner loop (an attention body's kv loop): `# ovl: tile kv=<var>` marks the
// statement that sets the block of the gathered operand's rows one iteration reads. The
// iteration remaps the block through the visit order right after it and waits on the block's
// chunk slots there — or, when the loop's last statement is an `if` on the block that holds
// the rest of the iteration (a causal skip), at the top of that `if`, so a skipped block
// waits for nothing.
import type { KvTileAnnotation } from "./annotations.js";
import { assignedNames } from "./kernel.js";
import { LocalKernelError } from "./errors.js";
import { field, lineOf, named, walk, type SyntaxNode } from "./parser.js";

/** A statement that sets an inner loop's kv block (`# ovl: tile kv=<var>`). */
export interface KvStatement {
  /** The expression_statement holding the assignment. */
  node: SyntaxNode;
  /** The block variable. */
  kv: string;
  line: number;
  /** The `for` statement whose body the statement stands in (one iteration, one block). */
  loop: SyntaxNode;
  /** The `if` block that holds the rest of the iteration, when it is guarded; waits go at its top. */
  guard?: SyntaxNode;
}

function misplaced(file: string, a: KvTileAnnotation, what: string): LocalKernelError {
  return new LocalKernelError("bad-annotation", file, lineOf(a.comment), what);
}

function mentions(node: SyntaxNode, name: string): boolean {
  for (const n of walk(node)) if (n.type === "identifier" && n.text === name) return true;
  return false;
}

/** Whether `node` is the first thing on its line (inserted lines go in front of it). */
export function startsLine(source: string, node: SyntaxNode): boolean {
  const lineStart = source.lastIndexOf("\n", node.startIndex - 1) + 1;
  return source.slice(lineStart, node.startIndex).trim() === "";
}

/**
 * The statement `a` trails, checked: an assignment of the block variable, alone on its
 * line(s), standing directly in the body of a `for` over `range`/`tl.range` inside `func`,
 * the only kv statement of that loop. Throws {@link LocalKernelError} naming the line.
 */
export function kvStatement(func: SyntaxNode, source: string, a: KvTileAnnotation, file: string): KvStatement {
  const row = a.comment.startPosition.row;
  const stmt = [...walk(func)]
    .filter((n) => n.type === "expression_statement" && n.startPosition.row <= row && row <= n.endPosition.row)
    .pop();
  if (stmt === undefined) throw misplaced(file, a, '"# ovl: tile kv=" must trail the statement that sets the kv block');
  const siblings = stmt.parent === null ? [] : named(stmt.parent).filter((s) => s.type !== "comment");
  const shares = siblings.some(
    (s) => s.id !== stmt.id && s.startPosition.row <= stmt.endPosition.row && s.endPosition.row >= stmt.startPosition.row,
  );
  if (shares) throw misplaced(file, a, "a kv block statement must be alone on its line(s)");
  const assignment = named(stmt)[0];
  if (assignment?.type !== "assignment") throw misplaced(file, a, '"# ovl: tile kv=" must trail an assignment');
  const names = assignedNames(assignment);
  if (!names.includes(a.kv))
    throw misplaced(file, a, `kv block variable ${a.kv} is not assigned by this statement (it assigns ${names.join(", ") || "nothing"})`);
  const body = stmt.parent;
  const loop = body?.parent;
  if (body?.type !== "block" || loop?.type !== "for_statement" || field(loop, "body")?.id !== body.id) {
    throw new LocalKernelError(
      "unsafe-tile-loop",
      file,
      lineOf(stmt),
      "a kv block statement must stand directly in the body of the for loop over the kv blocks (not inside if/while), so every iteration runs it",
    );
  }
  const range = field(loop, "right");
  const fn = range?.type === "call" ? field(range, "function") : undefined;
  if (fn?.text !== "range" && fn?.text !== "tl.range") {
    throw new LocalKernelError("unsafe-tile-loop", file, lineOf(loop), "the kv loop must be a for over range(...) or tl.range(...)");
  }
  const rest = siblings.slice(siblings.findIndex((s) => s.id === stmt.id) + 1);
  const next = rest[0];
  let guard: SyntaxNode | undefined;
  if (rest.length === 1 && next?.type === "if_statement" && field(next, "alternative") === undefined) {
    const condition = field(next, "condition");
    const block = field(next, "consequence");
    if (condition !== undefined && block !== undefined && mentions(condition, a.kv)) {
      const first = named(block).find((s) => s.type !== "comment");
      if (first === undefined || !startsLine(source, first)) {
        throw new LocalKernelError("bad-annotation", file, lineOf(next), "the block of the kv loop's if must start on a line of its own");
      }
      guard = block;
    }
  }
  return { node: stmt, kv: a.kv, line: lineOf(stmt), loop, ...(guard === undefined ? {} : { guard }) };
}

/** Checks that no loop holds two kv statements. */
export function checkKvLoops(statements: readonly KvStatement[], file: string): void {
  const seen = new Set<number>();
  for (const s of statements) {
    if (seen.has(s.loop.id)) {
      throw new LocalKernelError("bad-annotation", file, s.line, "a kv loop has one kv block statement; this is a second in the same loop");
    }
    seen.add(s.loop.id);
  }
}

/** Source range `[start, end)` in which a kv statement's iteration may read the gathered operand: after its wait. */
export function kvReadRange(s: KvStatement): { start: number; end: number } {
  return s.guard === undefined ? { start: s.node.endIndex, end: s.loop.endIndex } : { start: s.guard.startIndex, end: s.guard.endIndex };
}
