// Validation problems as plain values: a code from a closed list, the path to the field
// at fault and a message saying what to fix; plus the error class thrown by the asserting
// variants and the conversion of zod's shape errors into the same form.
import type { z } from "zod";

/**
 * Every problem the validators report:
 * - `invalid-shape`: the value does not match the schema (missing field, wrong type, ...);
 * - `wrong-side`: `side` contradicts TileLink Table 3 for this primitive;
 * - `acquire-on-notify`, `release-on-wait`, `relaxed-signal`, `ordered-data`: memory order;
 * - `rank-with-broadcast`, `p2p-without-rank`: target ranks;
 * - `rank-outside-world`: a rank not in `0 .. worldSize-1`;
 * - `host-on-sm`, `tma-on-host`, `device-on-copy-engine`, `tma-on-signal`: resource binding;
 * - `narrow-scope-across-ranks`: a primitive another rank or the host observes without `sys` scope;
 * - `unknown-slot`, `add-exceeds-arrivals`, `slot-relation-mismatch`: a signal against its slot;
 * - `arrivals-below-one`, `add-below-one`, `arrivals-exceed-half-range`, `duplicate-slot`,
 *   `relation-unknown-slot`, `slot-in-two-relations`: the channel's slot configuration.
 */
export const PRIMITIVE_ISSUE_CODES = [
  "invalid-shape",
  "wrong-side",
  "acquire-on-notify",
  "release-on-wait",
  "relaxed-signal",
  "ordered-data",
  "rank-with-broadcast",
  "p2p-without-rank",
  "rank-outside-world",
  "host-on-sm",
  "tma-on-host",
  "device-on-copy-engine",
  "tma-on-signal",
  "narrow-scope-across-ranks",
  "unknown-slot",
  "add-exceeds-arrivals",
  "slot-relation-mismatch",
  "arrivals-below-one",
  "add-below-one",
  "arrivals-exceed-half-range",
  "duplicate-slot",
  "relation-unknown-slot",
  "slot-in-two-relations",
] as const;

/** One of {@link PRIMITIVE_ISSUE_CODES}. */
export type PrimitiveIssueCode = (typeof PRIMITIVE_ISSUE_CODES)[number];

/** A path into the validated value: object keys and array indices. */
export type IssuePath = readonly (string | number)[];

/** One problem found by a validator. */
export interface PrimitiveIssue {
  /** What kind of problem it is. */
  readonly code: PrimitiveIssueCode;
  /** Where in the validated value it is. */
  readonly path: IssuePath;
  /** What is wrong and what to change. */
  readonly message: string;
}

/** The result of a validator: the parsed value, or every problem found. */
export type Validation<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly issues: readonly PrimitiveIssue[] };

/** Thrown by the asserting validators and the builders; carries the first issue's code and path and all issues. */
export class PrimitiveError extends Error {
  /** The code of the first issue. */
  readonly code: PrimitiveIssueCode;
  /** The path of the first issue. */
  readonly path: IssuePath;
  /** Every issue found, first one included. */
  readonly issues: readonly PrimitiveIssue[];

  constructor(issues: readonly [PrimitiveIssue, ...PrimitiveIssue[]]) {
    const [first] = issues;
    const more =
      issues.length > 1
        ? ` (and ${issues.length - 1} more: ${issues
            .slice(1)
            .map((i) => i.code)
            .join(", ")})`
        : "";
    super(`${formatPath(first.path)}: ${first.message}${more}`);
    this.name = "PrimitiveError";
    this.code = first.code;
    this.path = first.path;
    this.issues = issues;
  }
}

/** `a.b[2].c` for a path, `(root)` for the empty one. */
export function formatPath(path: IssuePath): string {
  if (path.length === 0) return "(root)";
  return path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");
}

/** Build an issue; `path` is relative to `base`. */
export function issue(code: PrimitiveIssueCode, base: IssuePath, path: IssuePath, message: string): PrimitiveIssue {
  return { code, path: [...base, ...path], message };
}

// Count constraints the schema states but that deserve their own code.
const BELOW_ONE: Readonly<Record<string, PrimitiveIssueCode>> = {
  arrivals: "arrivals-below-one",
  add: "add-below-one",
};

/** Convert zod's issues to {@link PrimitiveIssue}s under `base`. */
export function issuesFromZod(error: z.ZodError, base: IssuePath): PrimitiveIssue[] {
  return error.issues.map((zi) => {
    const path = zi.path.map((p) => (typeof p === "number" ? p : String(p)));
    const leaf = path[path.length - 1];
    const special = zi.code === "too_small" && typeof leaf === "string" ? BELOW_ONE[leaf] : undefined;
    if (special !== undefined) {
      return issue(
        special,
        base,
        path,
        `${String(leaf)} must be an integer >= 1: each launch must add at least 1 to a slot, or no wait can ever be satisfied`,
      );
    }
    return issue("invalid-shape", base, path, zi.message);
  });
}

/** The asserting form of a {@link Validation}: its value, or a {@link PrimitiveError}. */
export function unwrap<T>(result: Validation<T>): T {
  if (result.ok) return result.value;
  const [first, ...rest] = result.issues;
  if (first === undefined) throw new Error("a failed validation must carry at least one issue");
  throw new PrimitiveError([first, ...rest]);
}
