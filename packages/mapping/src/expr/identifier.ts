// Variable and table names end up verbatim in emitted Python, Triton and TypeScript, so they
// are validated once here: an identifier that is neither a Python keyword nor a JS reserved word.
import { MappingError } from "../errors.js";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Python 3 keywords and soft keywords (`match`, `case`, `type`, `_`): the one list every package checks names against. */
export const PYTHON_KEYWORDS: ReadonlySet<string> = new Set([
  "False",
  "None",
  "True",
  "and",
  "as",
  "assert",
  "async",
  "await",
  "break",
  "class",
  "continue",
  "def",
  "del",
  "elif",
  "else",
  "except",
  "finally",
  "for",
  "from",
  "global",
  "if",
  "import",
  "in",
  "is",
  "lambda",
  "nonlocal",
  "not",
  "or",
  "pass",
  "raise",
  "return",
  "try",
  "while",
  "with",
  "yield",
  "match",
  "case",
  "type",
  "_",
]);

/** Python keywords plus the names the printers emit (`min`, `max`, `tl`). */
const PYTHON_RESERVED: ReadonlySet<string> = new Set([...PYTHON_KEYWORDS, "min", "max", "tl"]);

/** JavaScript reserved words (strict mode) and the globals the TypeScript printer emits. */
const JS_RESERVED = new Set([
  "break",
  "case",
  "catch",
  "class",
  "const",
  "continue",
  "debugger",
  "default",
  "delete",
  "do",
  "else",
  "enum",
  "export",
  "extends",
  "false",
  "finally",
  "for",
  "function",
  "if",
  "import",
  "in",
  "instanceof",
  "new",
  "null",
  "return",
  "super",
  "switch",
  "this",
  "throw",
  "true",
  "try",
  "typeof",
  "var",
  "void",
  "while",
  "with",
  "yield",
  "let",
  "static",
  "implements",
  "interface",
  "package",
  "private",
  "protected",
  "public",
  "await",
  "arguments",
  "eval",
  "undefined",
  "NaN",
  "Infinity",
  "Math",
]);

/** True when `name` may be used as a variable or table name. */
export function isValidIdentifier(name: string): boolean {
  return IDENTIFIER.test(name) && !PYTHON_RESERVED.has(name) && !JS_RESERVED.has(name);
}

/** Throws `invalid-identifier` unless {@link isValidIdentifier}; returns the name. */
export function checkIdentifier(name: string, what = "variable name"): string {
  if (typeof name !== "string" || !isValidIdentifier(name)) {
    throw new MappingError(
      "invalid-identifier",
      `${what} ${JSON.stringify(name)} is not usable: it must match ^[A-Za-z_][A-Za-z0-9_]*$ and not be a Python keyword or JavaScript reserved word`,
    );
  }
  return name;
}
