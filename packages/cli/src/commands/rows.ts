// `ovl emit ag-gemm --any-rows`: the row counts one compiled operator serves, and where it should not
// overlap at all. The crossover is the simulator's: at each of a sweep of row counts it prices the
// emitted operator against the GEMM then the NCCL-like collective; below the smallest row count from
// which overlapping wins at every larger point of the sweep, the runner runs the plain sequence.
import { DEFAULT_TARGET, type TargetName } from "@ovl/primitives";
import type { RowsRequest } from "@ovl/tlx-emitter";
import { MODELS } from "../comm-sms.js";
import { UsageError } from "../errors.js";
import type { Problem } from "../problem.js";
import { predict } from "./simulate.js";

/** Chunks per rank and the m-block: two chunks of at least an m-block each (see the emitter's `minRowsPerRank`). */
function leastRows(p: Problem): number {
  return p.world * (p.split * p.tile.BM + (p.split - 1) ** 2);
}

/** The sweep the crossover is looked for on: about eight row counts from `min` to `max`, multiples of the world. */
export function rowSweep(min: number, max: number, world: number): number[] {
  const out = new Set<number>();
  for (let i = 0; i <= 8; i++) {
    const M = Math.round((min * (max / min) ** (i / 8)) / world) * world;
    out.add(Math.min(max, Math.max(min, M)));
  }
  return [...out].sort((a, b) => a - b);
}

/** `--any-rows`'s request: the range, and the simulator's crossover on the target's model (when it has one). */
export function rowsRequest(p: Problem, o: { minRows?: number; maxRows?: number }, target: TargetName | undefined): RowsRequest {
  if (p.operator !== "ag-gemm")
    throw new UsageError("unsupported", `--any-rows compiles ag-gemm for every row count; ${p.operator} is compiled per M`);
  const least = leastRows(p);
  const min = o.minRows ?? least;
  const max = o.maxRows ?? 32768 - (32768 % p.world);
  if (min % p.world || max % p.world || min > max) {
    throw new UsageError("usage", `--min-rows ${min} and --max-rows ${max} must be multiples of --world ${p.world}, min <= max`);
  }
  // The emitter raises the least rows to what its resolved tile needs: a --min-rows not given is left to it.
  const request: RowsRequest = { ...(o.minRows === undefined ? {} : { min }), max, split: p.split };
  const hw = MODELS[target ?? DEFAULT_TARGET.name];
  if (hw === undefined) return request;
  const sweep = rowSweep(min, max, p.world).map((M) => ({ M, speedup: predict({ ...p, M }, hw.name).speedup }));
  // The smallest point from which overlapping wins at every larger point of the sweep.
  let from = sweep.length;
  while (from > 0 && sweep[from - 1]!.speedup > 1) from -= 1;
  if (from === 0) return request;
  const first = sweep[from];
  const last = sweep[from - 1]!;
  if (first === undefined) {
    return {
      ...request,
      fallbackBelow: max + p.world,
      fallbackReason: `simulated on ${hw.name}: overlapping loses at every row count up to ${max} (${last.speedup.toFixed(2)}x at ${last.M})`,
    };
  }
  return {
    ...request,
    fallbackBelow: first.M,
    fallbackReason: `simulated on ${hw.name}: overlapping is slower than the GEMM then the collective at ${last.M} rows (${last.speedup.toFixed(2)}x) and faster from ${first.M} (${first.speedup.toFixed(2)}x)`,
  };
}
