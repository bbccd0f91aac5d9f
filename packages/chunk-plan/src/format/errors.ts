// Typed errors of reading plans: malformed JSON text or a value that does not match the
// `ovl.chunk-plan/v1` schema, with every issue located by its JSON path.

/** Machine-readable reason of a {@link FormatError}. */
export type FormatErrorCode = "invalid-json" | "invalid-plan";

/** One schema violation: where (`$.ranks[0].streams[1][2].peer`) and what is wrong there. */
export interface FormatIssue {
  readonly path: string;
  readonly message: string;
}

/** The error of the format module; `issues` lists every violation found. */
export class FormatError extends Error {
  override readonly name = "FormatError";
  readonly code: FormatErrorCode;
  readonly issues: readonly FormatIssue[];

  constructor(code: FormatErrorCode, issues: readonly FormatIssue[]) {
    const shown = issues.slice(0, 8).map((i) => `  ${i.path}: ${i.message}`);
    if (issues.length > shown.length) shown.push(`  ... and ${issues.length - shown.length} more`);
    const head =
      code === "invalid-json"
        ? "not valid JSON"
        : `not a valid ovl.chunk-plan/v1 plan (${issues.length} issue${issues.length === 1 ? "" : "s"})`;
    super(`${head}:\n${shown.join("\n")}`);
    this.code = code;
    this.issues = issues;
  }
}

/** `$.ranks[0].streams[1]` from a path of keys and indices. */
export function jsonPath(path: readonly PropertyKey[]): string {
  return (
    "$" +
    path
      .map((key) => {
        if (typeof key === "number") return `[${key}]`;
        const name = String(key);
        return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? `.${name}` : `[${JSON.stringify(name)}]`;
      })
      .join("")
  );
}
