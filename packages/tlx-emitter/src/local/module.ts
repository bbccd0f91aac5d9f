// What of the user's module is kept: its imports (of Triton, math and typing only, since the
// emitted module must carry no unvalidated code) and its `@triton.jit` functions, verbatim.
// Host code is dropped: it runs on the host, never in the kernel module.
import { LocalKernelError } from "./errors.js";
import { field, lineOf, named, walk, type SyntaxNode } from "./parser.js";

/** The kept top-level parts of a module. */
export interface ModuleParts {
  /** Kept import statements, in source order. */
  imports: SyntaxNode[];
  /** Kept `@triton.jit` definitions (the decorated_definition nodes), in source order. */
  functions: SyntaxNode[];
  /** Names bound to `triton.language` by the kept imports (usually `tl`). */
  languageAliases: Set<string>;
}

/** Modules whose import is kept; anything else the kernel imports is refused. */
function allowedModule(module: string): boolean {
  return (
    module === "triton" || module === "triton.language" || module.startsWith("triton.language.") || module === "math" || module === "typing"
  );
}

/** Host-only modules: their imports are dropped when no kept function uses the bound names. */
function hostModule(module: string): boolean {
  return module === "torch" || module.startsWith("torch.");
}

/** Whether a decorator is Triton's jit (`@triton.jit`, `@jit`, either called with options). */
export function isJitDecorator(decorator: SyntaxNode): boolean {
  let expr = named(decorator)[0];
  if (expr?.type === "call") expr = field(expr, "function");
  if (expr === undefined) return false;
  return expr.type === "identifier" ? expr.text === "jit" : expr.type === "attribute" && expr.text === "triton.jit";
}

/** The function_definition of a decorated_definition that is a jit function, else undefined. */
export function jitFunction(node: SyntaxNode): SyntaxNode | undefined {
  if (node.type !== "decorated_definition") return undefined;
  const def = field(node, "definition");
  if (def?.type !== "function_definition") return undefined;
  return named(node).some((d) => d.type === "decorator" && isJitDecorator(d)) ? def : undefined;
}

/** Splits the module into kept imports and jit functions; refuses imports outside the allowed set. */
export function moduleParts(root: SyntaxNode, file: string): ModuleParts {
  const imports: SyntaxNode[] = [];
  const functions: SyntaxNode[] = [];
  const hostImports: { node: SyntaxNode; names: string[] }[] = [];
  const languageAliases = new Set<string>();
  for (const stmt of named(root)) {
    if (stmt.type === "import_statement" || stmt.type === "import_from_statement") {
      const bindings = importBindings(stmt);
      const refused = bindings.find((b) => !allowedModule(b.module));
      if (refused === undefined) {
        imports.push(stmt);
        for (const b of bindings) if (b.target === "triton.language") languageAliases.add(b.name);
      } else if (bindings.every((b) => hostModule(b.module))) {
        hostImports.push({ node: stmt, names: bindings.map((b) => b.name) });
      } else {
        throw new LocalKernelError(
          "bad-import",
          file,
          lineOf(stmt),
          `import of ${JSON.stringify(refused.module)} is not allowed in a kernel module (only triton, triton.language, math and typing)`,
        );
      }
    } else if (stmt.type === "future_import_statement") {
      throw new LocalKernelError("bad-import", file, lineOf(stmt), "from __future__ imports are not allowed in a kernel module");
    } else if (jitFunction(stmt) !== undefined) {
      functions.push(stmt);
    }
  }
  // A host import the jit code reads would leave the emitted module unable to compile.
  const used = identifiersOf(functions);
  for (const h of hostImports) {
    const name = h.names.find((n) => used.has(n));
    if (name !== undefined) {
      throw new LocalKernelError(
        "bad-import",
        file,
        lineOf(h.node),
        `${JSON.stringify(name)} is imported from a host module but used by a @triton.jit function`,
      );
    }
  }
  return { imports, functions, languageAliases };
}

interface ImportBinding {
  /** The module the statement imports from (`from M import x` / `import M`). */
  module: string;
  /** The name the statement binds. */
  name: string;
  /** What the bound name refers to, as a dotted path. */
  target: string;
}

function importBindings(stmt: SyntaxNode): ImportBinding[] {
  if (stmt.type === "import_statement") {
    return named(stmt).flatMap((n): ImportBinding[] => {
      if (n.type === "dotted_name") return [{ module: n.text, name: named(n)[0]?.text ?? n.text, target: named(n)[0]?.text ?? n.text }];
      if (n.type === "aliased_import") {
        const module = field(n, "name")?.text ?? "";
        return [{ module, name: field(n, "alias")?.text ?? module, target: module }];
      }
      return [];
    });
  }
  const moduleNode = field(stmt, "module_name");
  // Relative imports (`from . import x`) name no module the emitted code could rely on.
  const module = moduleNode?.type === "dotted_name" ? moduleNode.text : `relative import ${moduleNode?.text ?? ""}`;
  const names = named(stmt).filter((n) => n.id !== moduleNode?.id && n.type !== "comment");
  if (names.some((n) => n.type === "wildcard_import")) return [{ module, name: "*", target: `${module}.*` }];
  return names.map((n): ImportBinding => {
    if (n.type === "aliased_import") {
      const orig = field(n, "name")?.text ?? "";
      return { module, name: field(n, "alias")?.text ?? orig, target: `${module}.${orig}` };
    }
    return { module, name: n.text, target: `${module}.${n.text}` };
  });
}

/** Every identifier occurring in `nodes`. */
export function identifiersOf(nodes: readonly SyntaxNode[]): Set<string> {
  const out = new Set<string>();
  for (const node of nodes) for (const n of walk(node)) if (n.type === "identifier") out.add(n.text);
  return out;
}
