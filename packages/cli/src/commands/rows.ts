// `ovl emit ag-gemm|gemm-rs|gemm-ar|a2a-gemm|ag-moe --any-rows` (ag-attention's: `rows-attention.ts`): the row counts one compiled operator serves, and where it should not
// overlap at all. The crossover is the simulator's: at each of a sweep of row counts it prices the
// emitted operator against the GEMM then the NCCL-like collective; below the smallest row count from
// which overlapping wins at every larger point of the sweep, the runner runs the plain sequence.
import { DEFAULT_TARGET, type TargetName } from "@ovl/primitives";
import type { RowsRequest } from "@ovl/tlx-emitter";
import { consumes } from "../build.js";
import { MODELS } from "../comm-sms.js";
import { UsageError } from "../errors.js";
import type { Problem } from "../problem.js";
import { predict } from "./simulate.js";

/** The operators `--any-rows` compiles for every row count (`ag-moe` through `moeRowsRequest`). */
export const ANY_ROWS_OPERATORS: readonly string[] = ["ag-gemm", "gemm-rs", "gemm-ar", "a2a-gemm", "ag-attention"];

/** The most rows an any-row-count operator serves without --max-rows: 32768, down to a multiple of the world. */
export function defaultMaxRows(world: number): number {
  return 32768 - (32768 % world);
}

/** `--any-rows`'s range flags, or undefined without `--any-rows`. @throws {UsageError} `--min-rows`/`--max-rows` without `--any-rows`. */
export function anyRowsFlags(o: {
  anyRows?: boolean;
  minRows?: number;
  maxRows?: number;
}): { minRows?: number; maxRows?: number } | undefined {
  if (o.anyRows !== true) {
    if (o.minRows !== undefined || o.maxRows !== undefined) throw new UsageError("usage", "--min-rows and --max-rows go with --any-rows");
    return undefined;
  }
  return { ...(o.minRows === undefined ? {} : { minRows: o.minRows }), ...(o.maxRows === undefined ? {} : { maxRows: o.maxRows }) };
}

/**
 * The problem an any-row-count operator is compiled for: GEMM+ReduceScatter and GEMM+AllReduce move their partial
 * rows with SM pushes (`--backend sm`, their default under `--any-rows`); GEMM+AllReduce is the partitioned one;
 * AllToAll+GEMM exchanges its slabs with host copies (`--backend copy-engine`).
 * @throws {UsageError} an operator compiled per M only, a gemm-rs or gemm-ar `--backend` other than sm, an a2a-gemm
 *   `--backend` other than copy-engine, or gemm-ar's tile-wise template.
 */
export function anyRowsProblem(p: Problem, backendFlag: string | undefined): Problem {
  if (!ANY_ROWS_OPERATORS.includes(p.operator))
    throw new UsageError(
      "unsupported",
      `--any-rows compiles ${ANY_ROWS_OPERATORS.join(", ")} for every row count; ${p.operator} is compiled per M`,
    );
  if (p.operator === "ag-gemm") return p;
  if (p.operator === "a2a-gemm") {
    if (p.backend !== "copy-engine")
      throw new UsageError(
        "unsupported",
        `a2a-gemm --any-rows exchanges its slabs with host copies instantiated per M; drop --backend ${p.backend} or --any-rows`,
      );
    return p;
  }
  if (backendFlag !== undefined && p.backend !== "sm")
    throw new UsageError(
      "unsupported",
      `${p.operator} --any-rows delivers its partial rows with SM pushes; drop --backend ${p.backend} or --any-rows`,
    );
  if (p.operator === "gemm-ar" && p.template !== "direct")
    throw new UsageError(
      "unsupported",
      `gemm-ar --any-rows is the partitioned GEMM+AllReduce (--template direct); --template ${p.template} is compiled per M`,
    );
  return { ...p, backend: "sm" };
}

/** Chunks per rank and the m-block: two chunks of at least an m-block each (see the emitter's `minRowsPerRank`). */
function leastRows(p: Problem): number {
  return p.world * (p.split * p.tile.BM + (p.split - 1) ** 2);
}

/**
 * The sweep the crossover is looked for on: about eight row counts from `min` to `max`, multiples of `multiple`
 * (the world; for gemm-rs and gemm-ar, whole m-blocks per rank, the row counts their per-M plans are priced at). Empty when no
 * multiple lies in the range.
 */
export function rowSweep(min: number, max: number, multiple: number): number[] {
  const [lo, hi] = [Math.ceil(min / multiple) * multiple, Math.floor(max / multiple) * multiple];
  const out = new Set<number>();
  if (lo > hi) return [];
  for (let i = 0; i <= 8; i++) {
    const M = Math.round((min * (max / min) ** (i / 8)) / multiple) * multiple;
    out.add(Math.min(hi, Math.max(lo, M)));
  }
  return [...out].sort((a, b) => a - b);
}

/**
 * The range `--min-rows` / `--max-rows` name (default: from `least` to {@link defaultMaxRows}) and the request for it
 * with `split` chunks a rank; a `--min-rows` not given is left to the emitter, which raises it to what its resolved
 * tile needs. @throws {UsageError} bounds that are not multiples of the world, or min > max.
 */
export function rowsRange(
  o: { minRows?: number; maxRows?: number },
  least: number,
  world: number,
  split: number,
): { min: number; max: number; request: RowsRequest } {
  const min = o.minRows ?? least;
  const max = o.maxRows ?? defaultMaxRows(world);
  if (min % world || max % world || min > max) {
    throw new UsageError("usage", `--min-rows ${min} and --max-rows ${max} must be multiples of --world ${world}, min <= max`);
  }
  return { min, max, request: { ...(o.minRows === undefined ? {} : { min }), max, split } };
}

/**
 * `--any-rows`'s request for `p` (as {@link anyRowsProblem} resolved it): the range, and the simulator's crossover on
 * the target's model (when it has one).
 */
export function rowsRequest(p: Problem, o: { minRows?: number; maxRows?: number }, target: TargetName | undefined): RowsRequest {
  if (!ANY_ROWS_OPERATORS.includes(p.operator))
    throw new UsageError(
      "unsupported",
      `--any-rows compiles ${ANY_ROWS_OPERATORS.join(", ")} for every row count; ${p.operator} is compiled per M`,
    );
  const { min, max, request } = rowsRange(o, leastRows(p), p.world, p.split);
  const hw = MODELS[target ?? DEFAULT_TARGET.name];
  if (hw === undefined) return request;
  // GEMM+RS and GEMM+AR are priced by their per-M plans, which need whole m-blocks per rank; the consumers (AG+GEMM,
  // A2A+GEMM) at any multiple of the world.
  const multiple = consumes(p) ? p.world : p.world * p.tile.BM;
  const sweep = rowSweep(min, max, multiple).map((M) => ({ M, speedup: predict({ ...p, M }, hw.name).speedup }));
  return withCrossover(request, sweep, { max, world: p.world }, hw.name, "the GEMM then the collective");
}

/**
 * The MoE's `--any-rows` request (`ag-moe`): the range, and the simulator's crossover on the target's model, the MoE
 * priced as the AllGather+GEMM that moves the same tokens and does the same work (`gemm`: its GEMM of N·topk columns,
 * what the grouped GEMM computes without its padding).
 */
export function moeRowsRequest(
  gemm: Problem,
  o: { minRows?: number; maxRows?: number },
  target: TargetName | undefined,
  moe: { least: number; multiple: number; plain: string } = {
    least: gemm.world * (gemm.split + (gemm.split - 1) ** 2),
    multiple: gemm.world,
    plain: "the gather then the grouped GEMM",
  },
): RowsRequest {
  const { min, max, request } = rowsRange(o, moe.least, gemm.world, gemm.split);
  const hw = MODELS[target ?? DEFAULT_TARGET.name];
  if (hw === undefined) return request;
  const sweep = rowSweep(min, max, moe.multiple).map((M) => ({ M, speedup: predict({ ...gemm, M }, hw.name).speedup }));
  return withCrossover(request, sweep, { max, world: gemm.world }, hw.name, moe.plain);
}

/**
 * `request` with the simulator's crossover on `device` from `sweep` (row counts ascending, each with its predicted
 * speedup of overlapping over `plain`): below the smallest point from which overlapping wins at every larger point
 * of the sweep the runner does not overlap (past the range `max`, when it wins nowhere).
 */
export function withCrossover(
  request: RowsRequest,
  sweep: readonly { M: number; speedup: number }[],
  range: { readonly max: number; readonly world: number },
  device: string,
  plain: string,
): RowsRequest {
  if (sweep.length === 0) return request;
  // The smallest point from which overlapping wins at every larger point of the sweep.
  let from = sweep.length;
  while (from > 0 && sweep[from - 1]!.speedup > 1) from -= 1;
  if (from === 0) return request;
  const first = sweep[from];
  const last = sweep[from - 1]!;
  if (first === undefined) {
    return {
      ...request,
      fallbackBelow: range.max + range.world,
      fallbackReason: `simulated on ${device}: overlapping loses at every row count up to ${range.max} (${last.speedup.toFixed(2)}x at ${last.M})`,
    };
  }
  return {
    ...request,
    fallbackBelow: first.M,
    fallbackReason: `simulated on ${device}: overlapping is slower than ${plain} at ${last.M} rows (${last.speedup.toFixed(2)}x) and faster from ${first.M} (${first.speedup.toFixed(2)}x)`,
  };
}
