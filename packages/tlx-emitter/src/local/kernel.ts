// Reads an annotated local kernel: which jit function is the kernel, its role and operand,
// its signature, the tile loop and the statements that set the tile coordinates. Where each
// annotation may stand is checked here; what the code around them does is in safety.ts.
import type { Annotation, KvTileAnnotation, RoleAnnotation, TileAnnotation, TileLoopAnnotation } from "./annotations.js";
import { LocalKernelError } from "./errors.js";
import { checkKvLoops, kvStatement, type KvStatement } from "./kv-block.js";
import { jitFunction } from "./module.js";
import { assignedNames, field, lineOf, named, walk, type SyntaxNode } from "./parser.js";

/** One parameter of the kernel. */
export interface LocalParam {
  name: string;
  /** Annotated `tl.constexpr`. */
  constexpr: boolean;
}

/** A statement that sets the tile coordinates (`# ovl: tile m=... n=...`). */
export interface TileStatement {
  /** @internal The expression_statement holding the assignment (a tree-sitter node, not part of the public types). */
  node: SyntaxNode;
  m: string;
  n?: string;
  line: number;
}

/** Where the kernel is and what its annotations say. */
export interface KernelShape {
  entry: string;
  role: "consumer" | "producer";
  /** The gathered (consumer) or scattered (producer) parameter. */
  operand: string;
  /** The row-index table parameter (`rows=`) a consumer gathers or a producer scatters its rows through, if any. */
  rows?: string;
  /** The input a producer reads in the `rows=` table's block order (`blocks=`), if any. */
  blocks?: string;
  params: LocalParam[];
  /** The kernel's decorated_definition and function_definition. */
  definition: SyntaxNode;
  func: SyntaxNode;
  /** The persistent kernel's tile loop; undefined for a non-persistent kernel. */
  tileLoop?: SyntaxNode;
  /** Whether the tile loop asks Triton to warp-specialise it (`tl.range(..., warp_specialize=True)`). */
  warpSpecialized: boolean;
  /** The block that is one tile: the tile loop's body, or the function body. */
  tileBlock: SyntaxNode;
  tileStatements: TileStatement[];
  /** Statements that set an inner loop's kv block (`# ovl: tile kv=`); a kernel has these or tile statements. */
  kvStatements: KvStatement[];
}

const CONSTEXPR_TYPES = new Set(["tl.constexpr", "triton.language.constexpr", "constexpr"]);

function misplaced(file: string, a: Annotation, what: string): LocalKernelError {
  return new LocalKernelError("bad-annotation", file, lineOf(a.comment), what);
}

function contains(outer: SyntaxNode, inner: SyntaxNode): boolean {
  return inner.startIndex >= outer.startIndex && inner.endIndex <= outer.endIndex;
}

/** Reads the kernel from the module's jit functions and annotations. */
export function kernelShape(root: SyntaxNode, source: string, annotations: readonly Annotation[], file: string): KernelShape {
  const roles = annotations.filter((a): a is RoleAnnotation => a.kind === "role");
  const [role, second] = roles;
  if (role === undefined) {
    throw new LocalKernelError(
      "no-annotation",
      file,
      0,
      'no kernel annotation: put "# ovl: consumer gather=<param>" or "# ovl: producer scatter=<param>" on the line above @triton.jit',
    );
  }
  if (second !== undefined) throw misplaced(file, second, "a module holds one annotated kernel; this is a second kernel annotation");
  const { definition, func } = annotatedFunction(root, source, role, file);
  const entry = field(func, "name")?.text ?? "";
  const params = signature(func, file);
  const operand = params.find((p) => p.name === role.param);
  if (operand === undefined) {
    throw new LocalKernelError(
      "unknown-parameter",
      file,
      lineOf(role.comment),
      `${role.role === "consumer" ? "gather" : "scatter"}=${role.param} names no parameter of ${entry}`,
    );
  }
  if (operand.constexpr)
    throw new LocalKernelError("unknown-parameter", file, lineOf(role.comment), `${role.param} is a constexpr, not a tensor`);
  if (role.rows !== undefined) checkRowsParam(role, params, entry, file);
  if (role.blocks !== undefined) checkBlocksParam(role, params, entry, file);

  for (const a of annotations) {
    if (a.kind !== "role" && !contains(func, a.comment))
      throw misplaced(file, a, `"# ovl: ${a.kind}" outside the annotated kernel ${entry}`);
  }
  const loops = annotations.filter((a): a is TileLoopAnnotation => a.kind === "tile-loop");
  if (loops[1] !== undefined) throw misplaced(file, loops[1], "a kernel has one tile loop; this is a second");
  const tileLoop = loops[0] === undefined ? undefined : tileLoopOf(func, loops[0], file);
  const body = field(func, "body") as SyntaxNode;
  const tileBlock = tileLoop === undefined ? body : (field(tileLoop, "body") as SyntaxNode);

  const tileStatements = annotations
    .filter((a): a is TileAnnotation => a.kind === "tile")
    .map((a) => tileStatement(func, tileBlock, a, role.role, tileLoop !== undefined, file));
  const kvAnnotations = annotations.filter((a): a is KvTileAnnotation => a.kind === "kv-tile");
  const kvStatements = kvAnnotations.map((a) => kvStatement(func, source, a, file));
  checkKvLoops(kvStatements, file);
  const firstKv = kvAnnotations[0];
  if (firstKv !== undefined) {
    if (role.role !== "consumer") throw misplaced(file, firstKv, "only a consumer waits per kv block; a producer notifies per tile");
    if (tileStatements.length > 0) {
      throw misplaced(
        file,
        firstKv,
        "a kernel waits per tile (# ovl: tile m=) or per kv block of an inner loop (# ovl: tile kv=), not both",
      );
    }
    // A persistent kv kernel: every kv loop runs inside the work-item loop (`# ovl: tile-loop`).
    const outside = tileLoop === undefined ? undefined : kvStatements.find((s) => !contains(tileBlock, s.loop));
    if (outside !== undefined) {
      throw new LocalKernelError("unsafe-tile-loop", file, outside.line, "a persistent kernel's kv loop must stand inside its tile loop");
    }
  }
  if (tileStatements.length === 0 && kvStatements.length === 0) {
    throw new LocalKernelError(
      "no-annotation",
      file,
      lineOf(func),
      `${entry} has no "# ovl: tile m=<var>" statement: annotate the assignment that sets the tile's row block (or, for a kv loop, "# ovl: tile kv=<var>")`,
    );
  }
  return {
    entry,
    role: role.role,
    operand: role.param,
    ...(role.rows === undefined ? {} : { rows: role.rows }),
    ...(role.blocks === undefined ? {} : { blocks: role.blocks }),
    params,
    definition,
    func,
    tileBlock,
    tileStatements,
    kvStatements,
    ...(tileLoop ? { tileLoop } : {}),
    warpSpecialized: tileLoop !== undefined && warpSpecializes(tileLoop),
  };
}

/** Whether a tile loop's `tl.range(...)` passes `warp_specialize=True`. */
function warpSpecializes(loop: SyntaxNode): boolean {
  const range = field(loop, "right");
  const args = range === undefined ? undefined : field(range, "arguments");
  if (args === undefined) return false;
  return named(args).some(
    (a) => a.type === "keyword_argument" && field(a, "name")?.text === "warp_specialize" && field(a, "value")?.text === "True",
  );
}

/** `blocks=` names a tensor parameter of the kernel other than the scattered operand and the index table. */
function checkBlocksParam(role: RoleAnnotation, params: readonly LocalParam[], entry: string, file: string): void {
  const name = role.blocks as string;
  const p = params.find((x) => x.name === name);
  if (p === undefined || p.constexpr || name === role.param || name === role.rows) {
    throw new LocalKernelError(
      "unknown-parameter",
      file,
      lineOf(role.comment),
      `blocks=${name} must name an input tensor parameter of ${entry} other than ${role.param} and ${role.rows ?? "the index table"}`,
    );
  }
}

/** The jit function whose decorator or `def` line is the line right below the role comment. */
function annotatedFunction(
  root: SyntaxNode,
  source: string,
  role: RoleAnnotation,
  file: string,
): { definition: SyntaxNode; func: SyntaxNode } {
  const row = role.comment.startPosition.row;
  const lineStart = source.lastIndexOf("\n", role.comment.startIndex - 1) + 1;
  if (source.slice(lineStart, role.comment.startIndex).trim() !== "") {
    throw misplaced(file, role, "the kernel annotation must be a comment line of its own above @triton.jit");
  }
  for (const definition of named(root)) {
    const func = jitFunction(definition);
    if (func === undefined) continue;
    const rows = named(definition)
      .filter((d) => d.type === "decorator")
      .map((d) => d.startPosition.row);
    if (rows.includes(row + 1) || func.startPosition.row === row + 1) return { definition, func };
  }
  throw misplaced(file, role, "the kernel annotation must stand on the line directly above a @triton.jit function's decorator or def");
}

/** Positional parameters only: the inserted ones are appended, so nothing may follow with a default. */
function signature(func: SyntaxNode, file: string): LocalParam[] {
  const params = field(func, "parameters") as SyntaxNode;
  return named(params)
    .filter((p) => p.type !== "comment")
    .map((p) => {
      if (p.type === "identifier") return { name: p.text, constexpr: false };
      if (p.type === "typed_parameter") {
        const name = named(p).find((c) => c.type === "identifier");
        const type = field(p, "type");
        if (name !== undefined) return { name: name.text, constexpr: type !== undefined && CONSTEXPR_TYPES.has(type.text) };
      }
      throw new LocalKernelError(
        "bad-signature",
        file,
        lineOf(p),
        `parameter ${JSON.stringify(p.text)} is not supported: the kernel's parameters must be plain names (optionally ": tl.constexpr"), without defaults or */**, so ovl's parameters can be appended`,
      );
    });
}

function tileLoopOf(func: SyntaxNode, a: TileLoopAnnotation, file: string): SyntaxNode {
  const row = a.comment.startPosition.row;
  const loop = [...walk(func)].find((n) => {
    if (n.type !== "for_statement" && n.type !== "while_statement") return false;
    const body = field(n, "body");
    return n.startPosition.row <= row && body !== undefined && row < body.startPosition.row;
  });
  if (loop === undefined) throw misplaced(file, a, '"# ovl: tile-loop" must trail the header line of the tile loop\'s for statement');
  const range = field(loop, "right");
  const fn = range?.type === "call" ? field(range, "function") : undefined;
  if (loop.type !== "for_statement" || (fn?.text !== "range" && fn?.text !== "tl.range")) {
    throw new LocalKernelError("unsafe-tile-loop", file, lineOf(loop), "the tile loop must be a for over range(...) or tl.range(...)");
  }
  return loop;
}

function tileStatement(
  func: SyntaxNode,
  tileBlock: SyntaxNode,
  a: TileAnnotation,
  role: "consumer" | "producer",
  persistent: boolean,
  file: string,
): TileStatement {
  const row = a.comment.startPosition.row;
  const stmt = [...walk(func)]
    .filter((n) => n.type === "expression_statement" && n.startPosition.row <= row && row <= n.endPosition.row)
    .pop();
  if (stmt === undefined) throw misplaced(file, a, '"# ovl: tile" must trail the statement that sets the tile coordinates');
  const line = lineOf(stmt);
  // Inserted lines go after the statement's last line: another statement on that line would run before them.
  const siblings = stmt.parent === null ? [] : named(stmt.parent);
  const shares = siblings.some(
    (s) =>
      s.id !== stmt.id &&
      s.type !== "comment" &&
      s.startPosition.row <= stmt.endPosition.row &&
      s.endPosition.row >= stmt.startPosition.row,
  );
  if (shares) throw misplaced(file, a, "a tile statement must be alone on its line(s)");
  const assignment = named(stmt)[0];
  if (assignment?.type !== "assignment") throw misplaced(file, a, '"# ovl: tile" must trail an assignment');
  const names = assignedNames(assignment);
  for (const v of [a.m, a.n]) {
    if (v !== undefined && !names.includes(v))
      throw misplaced(file, a, `tile variable ${v} is not assigned by this statement (it assigns ${names.join(", ") || "nothing"})`);
  }
  if (role === "producer" && a.n === undefined)
    throw misplaced(file, a, "a producer's tile statement names its column block too: # ovl: tile m=<var> n=<var>");
  if (stmt.parent?.id !== tileBlock.id) {
    const where = persistent ? "directly in the tile loop's body" : "at the top level of the kernel's body";
    throw new LocalKernelError(
      "unsafe-tile-loop",
      file,
      line,
      `a tile statement must stand ${where} (not inside if/for/while), so every tile runs it`,
    );
  }
  return a.n === undefined ? { node: stmt, m: a.m, line } : { node: stmt, m: a.m, n: a.n, line };
}

/** `rows=` names a tensor parameter of the kernel other than the gathered operand. */
function checkRowsParam(role: RoleAnnotation, params: readonly LocalParam[], entry: string, file: string): void {
  const rows = params.find((p) => p.name === role.rows);
  const line = lineOf(role.comment);
  if (rows === undefined) throw new LocalKernelError("unknown-parameter", file, line, `rows=${role.rows} names no parameter of ${entry}`);
  if (rows.constexpr) throw new LocalKernelError("unknown-parameter", file, line, `rows=${role.rows} is a constexpr, not an index table`);
  if (rows.name === role.param)
    throw new LocalKernelError(
      "bad-annotation",
      file,
      line,
      `rows=${role.rows} is the ${role.role === "consumer" ? "gathered" : "scattered"} operand itself; name the index table`,
    );
}
