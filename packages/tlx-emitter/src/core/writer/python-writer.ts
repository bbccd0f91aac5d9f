// The Python writer: lines at an indentation level, blocks under a header, comments and
// docstrings whose text is sanitised. Structure comes from the emitter's own templates;
// every name and value from a plan or user goes through `pyName` / `pyLiteral` first.
import { EmitError } from "./errors.js";
import { sanitizeText } from "./literals.js";

const INDENT = "    ";

/**
 * Accumulates Python source. `line()` writes one line at the current indentation,
 * `block(header, body)` writes `header:` and runs `body` one level deeper, `indent()` /
 * `dedent()` move the level by hand. Lines may not contain newlines, so a caller cannot
 * smuggle a second statement into one line.
 */
export class PythonWriter {
  private readonly out: string[] = [];
  private level = 0;

  /** Write one line (or an empty line) at the current indentation. */
  line(text = ""): this {
    if (/[\r\n]/.test(text)) {
      throw new EmitError("bad-text", `a line may not contain a newline: ${JSON.stringify(text.slice(0, 60))}`);
    }
    this.out.push(text === "" ? "" : INDENT.repeat(this.level) + text);
    return this;
  }

  /** Write several lines. */
  lines(texts: readonly string[]): this {
    for (const t of texts) this.line(t);
    return this;
  }

  /** Write `header:` and `body` one level deeper; the header must not end with `:`. */
  block(header: string, body: (w: this) => void): this {
    if (header.endsWith(":")) throw new EmitError("bad-text", `block header "${header}" must not end with ':'`);
    this.line(`${header}:`);
    this.indent();
    const before = this.out.length;
    body(this);
    if (this.out.length === before) this.line("pass");
    this.dedent();
    return this;
  }

  /** A `#` comment; the text is sanitised (see `sanitizeText`). */
  comment(text: string): this {
    return this.line(`# ${sanitizeText(text)}`);
  }

  /** A `"""` docstring of sanitised lines. */
  docstring(...texts: readonly string[]): this {
    const safe = texts.map((t) => sanitizeText(t).trimEnd());
    if (safe.length <= 1) return this.line(`"""${safe[0] ?? ""}"""`);
    this.line(`"""${safe[0]}`);
    for (const t of safe.slice(1)) this.line(t);
    return this.line('"""');
  }

  /** One level deeper. */
  indent(): this {
    this.level++;
    return this;
  }

  /** One level shallower. @throws {EmitError} `unbalanced-indent` below level 0. */
  dedent(): this {
    if (this.level === 0) throw new EmitError("unbalanced-indent", "dedent() below the top level");
    this.level--;
    return this;
  }

  /** The source so far, newline-terminated. @throws {EmitError} if a block is still open. */
  toString(): string {
    if (this.level !== 0) throw new EmitError("unbalanced-indent", `${this.level} indent() without dedent()`);
    return `${this.out.join("\n")}\n`;
  }
}
