// Waits inside an inner loop (an attention body's kv loop): `# ovl: tile kv=<var>` marks the
// statement that sets the block of the gathered operand's rows one iteration reads. The
// iteration remaps the block through the visit order right after it and waits on the block's
// chunk slots there — or, when the loop's last statement is an `if` on the block that holds
// the rest of the iteration (a causal skip), at the top of that `if`, so a skipped block
// waits for nothing. Given arrival groups, a loop of the grouped form instead waits once per
// group in an outer loop around it, leaving the kv loop free of waits (software-pipelined); when
// the groups are block runs, a causal `if <kv> < <bound>:` clips each group's range instead.
import type { KvTileAnnotation } from "./annotations.js";
import { LocalKernelError } from "./errors.js";
import { assignedNames, field, lineOf, named, walk, type SyntaxNode } from "./parser.js";

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

/** A kv loop's arrival groups: the lookup tables (kernel parameters) and the groups every rank loops over. */
export interface KvGroups {
  /** Groups per rank (every rank's tables padded to it with empty groups). */
  count: number;
  /** Table of `count + 1` visit positions a rank: group g's blocks are positions `[starts[g], starts[g + 1])`. */
  starts: string;
  /** Table of `count + 1` offsets into `waits` a rank: group g waits on `waits[waitAt[g] .. waitAt[g + 1])`. */
  waitAt: string;
  /** Table of the slots a rank waits for, group by group. */
  waits: string;
  /**
   * Table of `count + 1` kv blocks a rank: group g visits blocks `firsts[g]` onward, one a
   * position. Given, a causal guard (`if <kv> < <hi>:`, `if <lo> <= <kv> and <kv> < <hi>:`) is applied to the group's positions
   * instead ({@link causalBound}): the kv loop keeps no `if` and is software-pipelined.
   */
  firsts?: string;
}

/**
 * The block range of a kv loop's causal guard: `if <kv> < <hi>:` (blocks `[0, hi)`) or
 * `if <lo> <= <kv> and <kv> < <hi>:` (blocks `[lo, hi)`, a diagonal), each bound a name or an
 * integer, the condition on one line: the condition node and the bounds' text (`lo` absent for
 * the first form); `undefined` for any other guard.
 */
export function causalBound(s: KvStatement): { condition: SyntaxNode; lo?: string; hi: string } | undefined {
  const condition = s.guard?.parent === null || s.guard === undefined ? undefined : field(s.guard.parent, "condition");
  if (condition === undefined || condition.startPosition.row !== condition.endPosition.row) return undefined;
  const bound = (n: SyntaxNode | undefined): n is SyntaxNode => n?.type === "identifier" || n?.type === "integer";
  // `<a> <op> <b>`: the two sides, when the comparison has exactly that operator.
  const compare = (n: SyntaxNode | undefined, op: string): [SyntaxNode, SyntaxNode] | undefined => {
    if (n?.type !== "comparison_operator") return undefined;
    const sides = named(n);
    const ops = n.children.flatMap((c) => (c === null || c.isNamed ? [] : [c.type]));
    const [a, b] = sides;
    return sides.length === 2 && ops.length === 1 && ops[0] === op && bound(a) && bound(b) ? [a, b] : undefined;
  };
  const upper = (n: SyntaxNode | undefined): string | undefined => {
    const c = compare(n, "<");
    return c !== undefined && c[0].type === "identifier" && c[0].text === s.kv ? c[1].text : undefined;
  };
  const hi = upper(condition);
  if (hi !== undefined) return { condition, hi };
  if (condition.type !== "boolean_operator" || field(condition, "operator")?.text !== "and") return undefined;
  const lower = compare(field(condition, "left"), "<=");
  const top = upper(field(condition, "right"));
  if (lower === undefined || top === undefined || lower[1].type !== "identifier" || lower[1].text !== s.kv) return undefined;
  return { condition, lo: lower[0].text, hi: top };
}

/** A text edit of the kernel's source: insert `text` at `at`, replacing `[at, to)` when `to` is given. */
export interface KvEdit {
  at: number;
  to?: number;
  text: string;
}

function lineStart(source: string, at: number): number {
  return source.lastIndexOf("\n", at - 1) + 1;
}

/**
 * The kv loop of `s` in the grouped form, when it has it: `for <i> in range(<X>)` or
 * `range(0, <X>)` (or `tl.range`), `<X>` a name or an integer, the call on one line, and the kv
 * statement `<kv> = <i>`. Returns the loop variable and `<X>`'s text.
 */
export function groupableKvLoop(s: KvStatement): { index: string; stop: string; range: SyntaxNode } | undefined {
  const index = field(s.loop, "left");
  const range = field(s.loop, "right");
  if (index?.type !== "identifier" || range?.type !== "call" || range.startPosition.row !== range.endPosition.row) return undefined;
  const argNodes = named(field(range, "arguments") as SyntaxNode).filter((n) => n.type !== "comment");
  const simple = (n: SyntaxNode | undefined): n is SyntaxNode => n?.type === "identifier" || n?.type === "integer";
  const stop = argNodes.length === 1 ? argNodes[0] : argNodes.length === 2 && argNodes[0]?.text === "0" ? argNodes[1] : undefined;
  if (!simple(stop)) return undefined;
  const assignment = named(s.node)[0];
  const right = assignment === undefined ? undefined : field(assignment, "right");
  const left = assignment === undefined ? undefined : field(assignment, "left");
  if (left?.type !== "identifier" || left.text !== s.kv || right?.type !== "identifier" || right.text !== index.text) return undefined;
  return { index: index.text, stop: stop.text, range };
}

/**
 * A kv loop waited for group by group: before the loop, the launch's wait target and an outer
 * loop over the rank's arrival groups that waits once on each slot the group first needs; the
 * loop itself, indented one level into it, runs over the group's visit positions only (still
 * bounded by its own stop), and each iteration remaps its position through the visit order.
 * No wait is left inside the kv loop, so Triton can software-pipeline it. `remap` are the
 * remap lines; `undefined` when the loop is not in the grouped form ({@link groupableKvLoop}).
 */
export function groupedKvEdits(
  source: string,
  s: KvStatement,
  groups: KvGroups,
  remap: readonly string[],
  eol: string,
): KvEdit[] | undefined {
  const form = groupableKvLoop(s);
  if (form === undefined) return undefined;
  const start = lineStart(source, s.loop.startIndex);
  const indent = source.slice(start, s.loop.startIndex);
  const unit = indent.includes("\t") ? "\t" : "    ";
  const { starts, waitAt, waits } = groups;
  const header = [
    "ovl_target = load_epoch_target(ovl_epoch_ptr, 1)",
    `for ovl_g in tl.range(0, ${groups.count}):`,
    `\tovl_lo = tl.load(${starts} + ovl_g)`,
    `\tovl_hi = tl.load(${starts} + ovl_g + 1)`,
    `\tfor ovl_w in tl.range(tl.load(${waitAt} + ovl_g), tl.load(${waitAt} + ovl_g + 1)):`,
    `\t\tovl_tok = wait_slot(ovl_sig_ptr, tl.load(${waits} + ovl_w), ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)`,
    // Every position of the group, and so every address of its blocks, depends on the waits.
    "\t\tovl_lo = consume_token(ovl_lo, ovl_tok)",
  ];
  const edits: KvEdit[] = [{ at: start, text: header.map((l) => indent + l.replace(/^\t+/, (t) => unit.repeat(t.length)) + eol).join("") }];
  for (let row = s.loop.startPosition.row, at = start; row <= s.loop.endPosition.row; row++) {
    const end = source.indexOf("\n", at);
    const line = source.slice(at, end < 0 ? source.length : end);
    if (line.trim() !== "") edits.push({ at, text: unit });
    if (end < 0) break;
    at = end + 1;
  }
  const causal = groups.firsts === undefined ? undefined : causalBound(s);
  if (causal === undefined) {
    edits.push({ at: form.range.startIndex, to: form.range.endIndex, text: `tl.range(ovl_lo, tl.minimum(ovl_hi, ${form.stop}))` });
  } else {
    // The group's blocks run from its first block: those in [lo, hi) are a run of its positions.
    const first = `tl.load(${groups.firsts} + ovl_g)`;
    const hi = `tl.minimum(tl.minimum(ovl_hi, ${form.stop}), ovl_lo + ${causal.hi} - ${first})`;
    const lo = causal.lo === undefined ? "ovl_lo" : `tl.maximum(ovl_lo, ovl_lo + ${causal.lo} - ${first})`;
    edits.push({ at: form.range.startIndex, to: form.range.endIndex, text: `tl.range(${lo}, ${hi})` });
    // Every visited block is under the bound: the guard holds, statically.
    edits.push({ at: causal.condition.startIndex, to: causal.condition.endIndex, text: "True" });
  }
  const stmtIndent = source.slice(lineStart(source, s.node.startIndex), s.node.startIndex) + unit;
  let after = source.indexOf("\n", s.node.endIndex);
  if (after < 0) after = source.length;
  else if (source[after - 1] === "\r") after -= 1;
  edits.push({ at: after, text: remap.map((l) => eol + stmtIndent + l).join("") });
  return edits;
}
