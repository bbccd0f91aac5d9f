// The scratch a body with a stream-K tail reads (kernels/gemm_tma_persistent_streamk.py):
// its pieces of the last wave's tiles leave fp32 partial sums in a slot each and count
// themselves in per tile; the last piece of a tile adds the partials, stores C and resets
// the count. The body names the scratch by three parameters; the compiler allocates it
// (every rank its own, zeroed once) and binds them.
import { TARGETS } from "@ovl/primitives";
import type { Buffer } from "../core/manifest/schema.js";
import { EmitError } from "../core/writer/index.js";
import type { Binding } from "../core/bind.js";

/** The parameters by which a body asks for stream-K scratch. */
export const STREAM_K_PARAMS = {
  /** `[slots, BLOCK_M, BLOCK_N]` fp32: one partial tile per piece. */
  partials: "partials_ptr",
  /** `[slots]` int32: pieces counted in per tail tile, zero between launches. */
  counts: "tile_counts_ptr",
  /** The slot count: the body never cuts the tail into more pieces than slots. */
  slots: "STREAM_K_SLOTS",
} as const;

/** Manifest buffers of the scratch. */
export const STREAM_K_BUFFERS = { partials: "stream_k_partials", counts: "stream_k_counts" } as const;

/**
 * Slots of the scratch: the most SMs of any target. A piece per program at most runs in the
 * tail, so a persistent grid of one program per SM never wants more; a larger grid (or a
 * smaller slot count) only cuts the tail into fewer pieces — the body checks, so any grid is
 * correct.
 */
export const STREAM_K_SLOTS = Math.max(...Object.values(TARGETS).map((t) => t.smCount));

/** The buffers and bindings of a body's stream-K scratch, or none for a body without its parameters. */
export interface StreamKScratch {
  readonly buffers: readonly Buffer[];
  readonly bindings: Readonly<Record<string, Binding>>;
}

/**
 * The stream-K scratch of a body with parameters `params` at tile `BM`×`BN`.
 * @throws {EmitError} `bad-param` for a body naming some of the three parameters but not all.
 */
export function streamKScratch(params: readonly string[], BM: number, BN: number): StreamKScratch {
  const names = Object.values(STREAM_K_PARAMS);
  const present = names.filter((n) => params.includes(n));
  if (present.length === 0) return { buffers: [], bindings: {} };
  if (present.length < names.length) {
    const missing = names.filter((n) => !present.includes(n));
    throw new EmitError(
      "bad-param",
      `the body names ${present.join(", ")} but not ${missing.join(", ")}: a stream-K tail takes all of ${names.join(", ")}`,
    );
  }
  const slots = STREAM_K_SLOTS;
  return {
    buffers: [
      { name: STREAM_K_BUFFERS.partials, shape: [slots, BM, BN], dtype: "fp32", symmetric: false, init: "zeros" },
      { name: STREAM_K_BUFFERS.counts, shape: [slots], dtype: "int32", symmetric: false, init: "zeros" },
    ],
    bindings: {
      [STREAM_K_PARAMS.partials]: { kind: "arg", arg: { kind: "buffer", name: STREAM_K_BUFFERS.partials } },
      [STREAM_K_PARAMS.counts]: { kind: "arg", arg: { kind: "buffer", name: STREAM_K_BUFFERS.counts } },
      [STREAM_K_PARAMS.slots]: { kind: "arg", arg: { kind: "int", value: slots } },
    },
  };
}
