// What every any-row-count compile path (`Operator.rows`: AllGather+GEMM, GEMM+ReduceScatter, the partitioned
// GEMM+AllReduce) does the same way: the GEMM's parameters at the operator's M, the persistent body that takes
// the row count as its `M`, the operator's M checked against the range it serves, the manifest's `rows` section,
// and the manifest written at that M with its kernels and `rows` kept symbolic.
import type { Expr } from "@ovl/mapping";
import { instantiateRows } from "../core/manifest/rows.js";
import type { Manifest, Rows } from "../core/manifest/schema.js";
import { validated } from "../core/manifest/validate.js";
import type { RowsRequest } from "../core/operator.js";
import { EmitError } from "../core/writer/index.js";
import type { LocalKernel } from "../local/index.js";
import { ROWS_VARIABLE } from "./ag-gemm/rows.js";

/** The range of row counts an operator serves (both multiples of the world). */
interface RowsRange {
  readonly min: number;
  readonly max: number;
}

/**
 * Checks that `kernel` (parsed from `path`, its role checked by the caller) is a persistent body with a parameter
 * `M` that rows mode binds to the call's row count; returns its parameter names.
 * @throws {EmitError} `bad-param` naming what the body lacks.
 */
export function checkRowsBody(kernel: LocalKernel, path: string): string[] {
  if (kernel.shape.tileLoop === undefined) {
    throw new EmitError("bad-param", `${path}: rows mode needs a persistent body (# ovl: tile-loop): its grid cannot depend on M`);
  }
  const names = kernel.params.map((p) => p.name);
  if (!names.includes("M")) {
    throw new EmitError(
      "bad-param",
      `${path}: rows mode binds the call's row count to the body's parameter M, which ${kernel.entry} lacks`,
    );
  }
  return names;
}

/** Checks that the operator's M `at` is one of the rows `range` serves. @throws {EmitError} `bad-param` otherwise. */
export function checkRowsAt(at: number, range: RowsRange, world: number): void {
  if (at < range.min || at > range.max || at % world) {
    throw new EmitError(
      "bad-param",
      `the operator's M (${at}) must be one of the rows it serves (${range.min}..${range.max}, multiples of ${world})`,
    );
  }
}

/** The expressions of a `rows` section: rows of the row-scaled buffers, host ops, m-blocks and (optional) tables over M. */
export interface RowsSectionParts {
  readonly buffers: Record<string, Expr>;
  readonly hostOps: Rows["hostOps"];
  readonly numPidM: Expr;
  readonly tables?: Record<string, Expr[][]>;
  /** Per kernel, its int arguments, grid, template params and gather sizes over M (`Rows.kernels`). */
  readonly kernels?: Rows["kernels"];
}

/** The manifest's `rows` section for `range` (multiples of `world`), described at `at`, with `req`'s fallback. */
export function rowsSection(req: RowsRequest, range: RowsRange, world: number, at: number, parts: RowsSectionParts): Rows {
  return {
    variable: ROWS_VARIABLE,
    range: { min: range.min, max: range.max },
    multiple: world,
    at,
    buffers: parts.buffers,
    hostOps: parts.hostOps,
    numPidM: parts.numPidM,
    ...(parts.tables === undefined ? {} : { tables: parts.tables }),
    ...(parts.kernels === undefined ? {} : { kernels: parts.kernels }),
    ...(req.fallbackBelow === undefined ? {} : { fallbackBelow: req.fallbackBelow }),
    ...(req.fallbackReason === undefined ? {} : { fallbackReason: req.fallbackReason }),
  };
}

/** `symbolic` (whose `rows` section is complete) as written: its concrete fields at `rows.at`, its kernels and `rows` kept. */
export function rowsManifest(symbolic: Manifest): Manifest {
  const concrete = instantiateRows(symbolic, symbolic.rows!.at);
  return validated({ ...concrete, kernels: symbolic.kernels, rows: symbolic.rows });
}
