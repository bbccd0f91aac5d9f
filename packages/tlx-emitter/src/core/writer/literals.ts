// Literals the emitter may write: finite numbers, booleans, checked identifiers, and
// string literals escaped so that no quote or newline in the text can end them early.
import { EmitError } from "./errors.js";
import { checkIdentifier } from "./identifiers.js";

/** A value {@link pyLiteral} accepts. */
export type PyScalar = number | boolean;

/**
 * The Python source of a finite number or a boolean. Integers print exactly (safe
 * integers only); other numbers print in a form Python reads back to the same double.
 * @throws {EmitError} `bad-literal` for NaN, ±Infinity, unsafe integers or other types.
 */
export function pyLiteral(value: PyScalar): string {
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new EmitError("bad-literal", `literal ${String(value)} is not a finite number or a boolean; only those are emitted`);
  }
  if (Number.isInteger(value)) {
    if (!Number.isSafeInteger(value)) {
      throw new EmitError("bad-literal", `integer ${value} is beyond 2^53 and would not print exactly; pass a smaller value`);
    }
    return Object.is(value, -0) ? "0" : String(value);
  }
  // JS prints the shortest round-tripping decimal; Python reads the same form ("1e-05" style).
  return String(value).replace("e+", "e");
}

/** The source of a name after checking it (see `checkIdentifier`). */
export function pyName(name: string): string {
  return checkIdentifier(name);
}

/**
 * A double-quoted Python string literal holding `text` exactly. Backslashes, quotes and
 * every control or non-ASCII character are escaped, so the literal is one line and
 * cannot be closed early, whatever the text.
 */
export function pyString(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === "\\") out += "\\\\";
    else if (ch === '"') out += '\\"';
    else if (code >= 0x20 && code < 0x7f) out += ch;
    else if (code <= 0xff) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else if (code <= 0xffff) out += `\\u${code.toString(16).padStart(4, "0")}`;
    else out += `\\U${code.toString(16).padStart(8, "0")}`;
  }
  return `${out}"`;
}

/**
 * Text made safe for a comment or a docstring line: printable ASCII only (others become
 * `?`), no backslash, no double quote, so it can neither end the line, nor close a
 * `"""` docstring, nor start an escape.
 * @throws {EmitError} never; the text is rewritten rather than refused.
 */
export function sanitizeText(text: string): string {
  let out = "";
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === "\\" || ch === '"') out += "'";
    else if (code >= 0x20 && code < 0x7f) out += ch;
    else out += code === 0x0a || code === 0x0d || code === 0x09 ? " " : "?";
  }
  return out;
}
