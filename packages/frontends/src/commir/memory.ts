// Per-rank memory of a scheduled CommIR program (Mercury §6: "we statically analyze each
// candidate's storage layout ... and compute the per-worker memory footprint"), used to
// prune candidates over a device's capacity.
import { type Mesh, regionBytes } from "@ovl/chunk-plan";
import { analyzeProgram, type ProgramFacts } from "./analyze.js";
import type { Program } from "./ir.js";

/** Bytes one rank needs, in total and per buffer. */
export interface MemoryEstimate {
  /** The largest footprint over ranks (what must fit). */
  readonly maxBytes: number;
  readonly perRank: readonly number[];
  /** Per buffer, the bytes on the rank with the largest footprint. */
  readonly perBuffer: Readonly<Record<string, number>>;
}

/**
 * Bytes per rank: a local input its held shard; a ring-passed or broadcast input two blocks
 * (double buffering: the block computed on and the one arriving); a gathered input the region it
 * reads; the output the region it computes, plus the reduced region when partial outputs
 * are reduced.
 */
export function estimateMemory(input: Program | ProgramFacts, mesh?: Mesh | readonly number[]): MemoryEstimate {
  const facts = "buffers" in input && "levels" in input ? input : analyzeProgram(input, mesh ?? [1]);
  const world = facts.buffers[0]?.held.length ?? 1;
  const rows = Array.from({ length: world }, (_, r) =>
    Object.fromEntries(
      facts.buffers.map((f) => {
        const bytes =
          f.comm === "ring" || f.comm === "broadcast"
            ? 2 * regionBytes(f.held[r]!, f.tensor)
            : f.role === "read"
              ? regionBytes(f.needed[r]!, f.tensor)
              : regionBytes(f.held[r]!, f.tensor) + (f.comm === "local" ? 0 : regionBytes(f.needed[r]!, f.tensor));
        return [f.buffer, bytes];
      }),
    ),
  );
  const perRank = rows.map((row) => Object.values(row).reduce((a, b) => a + b, 0));
  const worst = perRank.indexOf(Math.max(...perRank));
  return { maxBytes: perRank[worst]!, perRank, perBuffer: rows[worst]! };
}
