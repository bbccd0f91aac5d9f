// `ovl emit ag-attention --any-rows`: the sequence lengths one compiled attention operator serves, and where it
// should not overlap at all. The crossover is the simulator's (`predictAgAttention`): at a sweep of lengths it
// prices the overlapped operator against the AllGather of K/V then attention; below the smallest length from
// which overlapping wins at every longer point of the sweep, the runner runs the plain sequence.
import { predictAgAttention } from "@ovl/sim";
import { DEFAULT_TARGET } from "@ovl/primitives";
import { DEFAULT_ATTENTION_BLOCKS, type AttentionProblem, type RowsRequest } from "@ovl/tlx-emitter";
import { MODELS } from "../comm-sms.js";
import { UsageError } from "../errors.js";
import { rowSweep, rowsRange, withCrossover } from "./rows.js";

/** What `--any-rows` compiles attention over: the problem (its S the length described), the world, chunks, tile. */
export interface AttentionRows {
  readonly attention: AttentionProblem;
  readonly world: number;
  readonly split: number;
  /** The kv block (BLOCK_N) of `--tile`, if given. */
  readonly kvBlock?: number;
  readonly template?: string;
  readonly side?: string;
  readonly backend?: string;
}

/**
 * `--any-rows`'s request for attention: lengths from what whole kv-block chunks need (`--min-rows`) to `--max-rows`,
 * multiples of the world, and the simulator's crossover on the default target's model.
 * @throws {UsageError} a template, side or backend other than the swizzle push AllGather by copy engine (the plan
 *   realised at every length), or a bad range.
 */
export function attentionRowsRequest(r: AttentionRows, o: { minRows?: number; maxRows?: number }): RowsRequest {
  if ((r.template ?? "swizzle") !== "swizzle" || (r.side ?? "push") !== "push" || (r.backend ?? "copy-engine") !== "copy-engine") {
    throw new UsageError(
      "unsupported",
      "ag-attention --any-rows gathers K/V by the swizzle push AllGather over host copies instantiated per length; drop --template, --side and --backend or --any-rows",
    );
  }
  const BN = r.kvBlock ?? DEFAULT_ATTENTION_BLOCKS.BN;
  // Two chunks (or `split`) of at least a kv block each (the emitter's `minRowsPerRank`).
  const least = r.world * (r.split * BN + (r.split - 1) ** 2);
  const { min, max, request } = rowsRange(o, least, r.world, r.split);
  const hw = MODELS[DEFAULT_TARGET.name];
  if (hw === undefined) return request;
  const a = r.attention;
  const sweep = rowSweep(min, max, r.world).map((S) => ({
    M: S,
    speedup: predictAgAttention(
      { seq: S, heads: a.heads, kvHeads: a.kvHeads, headDim: a.headDim, causal: a.causal, world: r.world },
      { hardware: hw.name },
    ).speedup,
  }));
  return withCrossover(request, sweep, { max, world: r.world }, hw.name, "the AllGather of K/V then attention");
}
