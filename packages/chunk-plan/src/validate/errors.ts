// Typed findings of plan validation. Each names where it applies (rank, stream, op index),
// the region involved, and for deadlocks the cycle of ops, so a caller can point at the
// exact op to fix.
import type { Region } from "../model/schema.js";

/** Why a plan was rejected; grouped by the validation phase that finds it. */
export type PlanValidationCode =
  // structure
  | "duplicate-tensor"
  | "unknown-tensor"
  | "rank-mismatch"
  | "out-of-bounds"
  | "shape-mismatch"
  | "dtype-mismatch"
  | "bad-axis"
  | "collective-shape"
  | "collective-mismatch"
  | "rank-out-of-mesh"
  | "p2p-self"
  | "rank-plan-order"
  | "bad-claim"
  | "missing-dep"
  // writes
  | "duplicate-write"
  | "missing-write"
  // dependencies
  | "deadlock"
  | "read-before-write"
  | "write-race"
  // symbolic execution
  | "claim-mismatch";

/** An op's address in a plan: op `index` of stream `stream` on rank `rank`. */
export interface OpAddress {
  rank: number;
  stream: number;
  index: number;
}

/** Formats an op address as `rank 3 stream 0 op 7`. */
export function formatOp(ref: OpAddress): string {
  return `rank ${ref.rank} stream ${ref.stream} op ${ref.index}`;
}

/** One finding of {@link validatePlan}. */
export class PlanValidationError extends Error {
  /** Machine-readable reason, stable across versions. */
  readonly code: PlanValidationCode;
  /** Rank the finding applies to (the op's rank, or the rank whose buffer is wrong). */
  readonly rank: number | undefined;
  /** Stream of the offending op, when one op is at fault. */
  readonly stream: number | undefined;
  /** Index of the offending op in its stream. */
  readonly index: number | undefined;
  /** The elements involved (overlap, gap, racing read, wrong result). */
  readonly region: Region | undefined;
  /** For `deadlock`: the ops of one dependency cycle, each waiting on the next. */
  readonly cycle: OpAddress[] | undefined;

  constructor(
    code: PlanValidationCode,
    message: string,
    where: { rank?: number; stream?: number; index?: number; region?: Region; cycle?: OpAddress[] } = {},
  ) {
    super(message);
    this.name = "PlanValidationError";
    this.code = code;
    this.rank = where.rank;
    this.stream = where.stream;
    this.index = where.index;
    this.region = where.region;
    this.cycle = where.cycle;
  }
}

/** Thrown by {@link assertValidPlan}: carries every finding. */
export class InvalidPlanError extends Error {
  readonly code = "invalid-plan" as const;
  readonly errors: PlanValidationError[];

  constructor(planName: string, errors: PlanValidationError[]) {
    const head = errors
      .slice(0, 5)
      .map((e) => `  [${e.code}] ${e.message}`)
      .join("\n");
    const more = errors.length > 5 ? `\n  ...and ${errors.length - 5} more` : "";
    super(`plan ${planName} is invalid (${errors.length} finding${errors.length === 1 ? "" : "s"}):\n${head}${more}`);
    this.name = "InvalidPlanError";
    this.errors = errors;
  }
}

/** Collects findings up to a limit, so a badly broken plan does not produce millions. */
export class Findings {
  readonly errors: PlanValidationError[] = [];
  constructor(readonly limit: number) {}

  get full(): boolean {
    return this.errors.length >= this.limit;
  }

  add(error: PlanValidationError): void {
    if (this.errors.length < this.limit) this.errors.push(error);
  }
}
