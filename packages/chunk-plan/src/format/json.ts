// Plans as JSON: parsing unknown input into a typed plan (or a FormatError listing every
// issue), serialising with a stable key order so equal plans give equal text, and the
// JSON Schema of the format for readers outside TypeScript.
import { z } from "zod";
import { ChunkPlan } from "../model/schema.js";
import { FormatError, jsonPath } from "./errors.js";

/**
 * Parses `json` (an already-decoded value) as an `ovl.chunk-plan/v1` plan; defaults
 * (empty `deps`, empty `local`) are filled in. Throws a {@link FormatError} with code
 * `invalid-plan` listing every schema issue with its JSON path.
 */
export function parsePlan(json: unknown): ChunkPlan {
  const result = ChunkPlan.safeParse(json);
  if (result.success) return result.data;
  throw new FormatError(
    "invalid-plan",
    result.error.issues.map((issue) => ({ path: jsonPath(issue.path), message: issue.message })),
  );
}

/**
 * Parses JSON text as a plan. Never throws anything but a {@link FormatError}: code
 * `invalid-json` for text that is not JSON, `invalid-plan` for JSON that is not a plan.
 */
export function parsePlanJson(text: string): ChunkPlan {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new FormatError("invalid-json", [{ path: "$", message }]);
  }
  return parsePlan(value);
}

// Keys in the order a reader expects them (identity first, payload next, notes last);
// unknown keys follow in alphabetical order.
const KEY_ORDER = [
  "$schema",
  "name",
  "mesh",
  "shape",
  "dtype",
  "strides",
  "tensors",
  "claim",
  "kind",
  "collective",
  "side",
  "peer",
  "rank",
  "stream",
  "index",
  "slot",
  "arrivals",
  "purpose",
  "tensor",
  "src",
  "axis",
  "ranks",
  "offsets",
  "sizes",
  "region",
  "dst",
  "reduce",
  "local",
  "streams",
  "deps",
  "label",
  "signals",
  "slots",
  "notify",
];
const RANK_OF_KEY = new Map(KEY_ORDER.map((k, i) => [k, i]));

function compareKeys(a: string, b: string): number {
  const ra = RANK_OF_KEY.get(a) ?? KEY_ORDER.length;
  const rb = RANK_OF_KEY.get(b) ?? KEY_ORDER.length;
  return ra - rb || (a < b ? -1 : a > b ? 1 : 0);
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort(compareKeys)) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = canonical(v);
    }
    return out;
  }
  return value;
}

/** Options of {@link serializePlan}. */
export interface SerializeOptions {
  /** Spaces per indentation level; 0 writes one line (default 2). */
  readonly indent?: number;
}

/**
 * The plan as JSON text with a stable key order (`$schema`, `name`, `mesh`, ... then any
 * other key alphabetically), so equal plans serialise to equal text and
 * `parsePlanJson(serializePlan(p))` deep-equals a parsed `p`.
 */
export function serializePlan(plan: ChunkPlan, options: SerializeOptions = {}): string {
  const indent = options.indent ?? 2;
  return JSON.stringify(canonical(plan), null, indent > 0 ? indent : undefined);
}

/**
 * The JSON Schema of `ovl.chunk-plan/v1` (`z.toJSONSchema(ChunkPlan)`), describing plans
 * as this package writes them (`io: "output"`, defaulted fields required) or, with
 * `io: "input"`, as it accepts them (`deps` and `local` optional).
 */
export function chunkPlanJsonSchema(io: "input" | "output" = "output"): z.core.JSONSchema.BaseSchema {
  return z.toJSONSchema(ChunkPlan, { io });
}
