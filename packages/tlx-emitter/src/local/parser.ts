// The Python parser: tree-sitter's Python grammar run through web-tree-sitter (WebAssembly,
// no native build). Loading is async and costly, so the parser is made once and shared. Its
// trees are opaque outside the package: the public types name ovl's, not web-tree-sitter's
// (whose declarations need Emscripten's global types, which a strict downstream project lacks).
import { Language, Parser, type Node, type Tree } from "web-tree-sitter";
import { wasmPath } from "../core/assets.js";
import { LocalKernelError } from "./errors.js";

export type { Node as SyntaxNode, Tree as SyntaxTree } from "web-tree-sitter";

declare const pythonSyntaxTree: unique symbol;

/** A parsed Python module: tree-sitter's concrete syntax tree, opaque outside ovl (`parseLocalKernelWith` reads it). */
export interface PythonSyntaxTree {
  readonly [pythonSyntaxTree]: "tree-sitter-python";
}

/** A loaded Python parser (see {@link loadPythonParser}). */
export interface PythonParser {
  /** Parses `source` into a concrete syntax tree; indices are JavaScript string indices. */
  parse(source: string): PythonSyntaxTree;
}

/** The tree-sitter tree behind a {@link PythonSyntaxTree} (every one is made by {@link loadPythonParser}). */
export function syntaxTree(tree: PythonSyntaxTree): Tree {
  return tree as unknown as Tree;
}

let cached: Promise<PythonParser> | undefined;

/**
 * The Python parser, loaded once per process. The wasm files are the installed packages' (from
 * `src/` under vitest and from `dist/` alike) or the CLI bundle's copies (`wasmPath`).
 */
export function loadPythonParser(): Promise<PythonParser> {
  cached ??= load().catch((e: unknown) => {
    // A failed load (missing wasm) must not poison every later call.
    cached = undefined;
    throw e;
  });
  return cached;
}

async function load(): Promise<PythonParser> {
  const runtime = wasmPath("tree-sitter.wasm");
  await Parser.init({ locateFile: () => runtime });
  const language = await Language.load(wasmPath("tree-sitter-python.wasm"));
  const parser = new Parser();
  parser.setLanguage(language);
  return {
    parse(source: string): PythonSyntaxTree {
      const tree = parser.parse(source);
      if (tree === null) throw new Error("tree-sitter returned no tree");
      return tree as unknown as PythonSyntaxTree;
    },
  };
}

/** 1-based line of a node. */
export function lineOf(node: Node): number {
  return node.startPosition.row + 1;
}

/** The first ERROR or MISSING node in source order, or undefined when the tree is clean. */
export function firstSyntaxError(root: Node): Node | undefined {
  if (!root.hasError) return undefined;
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as Node;
    if (node.isError || node.isMissing) return node;
    // Children pushed last-first so they are visited in source order.
    for (let i = node.childCount - 1; i >= 0; i--) {
      const child = node.child(i);
      if (child !== null && (child.hasError || child.isMissing || child.isError)) stack.push(child);
    }
  }
  return undefined;
}

/** Throws `syntax-error` naming the first error's line. */
export function checkSyntax(root: Node, file: string): void {
  const bad = firstSyntaxError(root);
  if (bad === undefined) return;
  const what = bad.isMissing ? `missing ${bad.type}` : `cannot parse ${JSON.stringify(clip(bad.text))}`;
  throw new LocalKernelError("syntax-error", file, lineOf(bad), `Python syntax error: ${what}`);
}

function clip(text: string): string {
  const first = text.split("\n")[0] ?? "";
  return first.length > 40 ? `${first.slice(0, 40)}...` : first;
}

/** All descendants of `node` (itself included) in source order, depth first. */
export function* walk(node: Node): Generator<Node> {
  yield node;
  for (const child of node.children) if (child !== null) yield* walk(child);
}

/** Named children, without the nulls web-tree-sitter's typing allows. */
export function named(node: Node): Node[] {
  return node.namedChildren.filter((c): c is Node => c !== null);
}

/** A field's child or undefined. */
export function field(node: Node, name: string): Node | undefined {
  return node.childForFieldName(name) ?? undefined;
}

/** Names an assignment's left-hand sides bind (`a, b = ...`, `a = b = ...`). */
export function assignedNames(assignment: Node): string[] {
  const out: string[] = [];
  let node: Node | undefined = assignment;
  while (node?.type === "assignment") {
    const left = field(node, "left");
    if (left !== undefined) for (const n of walk(left)) if (n.type === "identifier" && n.parent?.type !== "attribute") out.push(n.text);
    node = field(node, "right");
  }
  return out;
}
