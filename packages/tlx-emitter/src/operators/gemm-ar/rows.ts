// GEMM+AllReduce (partitioned, SM stores) for any row count: the GEMM+ReduceScatter half of `../gemm-rs/rows.ts`,
// then `ar-reduce-broadcast-rows` storing each reduced tile of rank q's slab into every rank's output and adding its
// tile count to slot `recvBase + q` there, and `ar_done` waiting, on each rank, for every peer's slab: as many tiles
// as the reduction stores, ⌈m / BLOCK_M⌉ · ⌈N / BLOCK_N⌉, an @ovl/mapping expression of M (`ovl_rows`) checked
// at every M served (`checkGemmArRows`).
import { add, mul, toFunction, type Expr } from "@ovl/mapping";
import { EmitError } from "../../core/writer/index.js";
import { ROWS_VARIABLE } from "../ag-gemm/rows.js";
import type { RsRowsMaps, RsRowsShape } from "../gemm-rs/rows.js";

/** Per rank, the `[slot, arrivals]` pairs `ar_done` waits on: each peer's slab, all its tiles stored here. */
export function arRowsWaits(s: RsRowsShape, maps: RsRowsMaps, blockN: number, recvBase: number): Expr[][] {
  const tiles = mul(maps.reduceBlocks, Math.ceil(s.N / blockN));
  return Array.from({ length: s.world }, (_, r) =>
    Array.from({ length: s.world }, (_, q) => q)
      .filter((q) => q !== r)
      .flatMap((q) => [add(0, recvBase + q), tiles]),
  );
}

/**
 * Checks, at every M of the range, that each rank waits exactly once on every peer's slot `recvBase + q`, for as
 * many tiles as that peer's reduction stores over its m = M / world rows (⌈m / BLOCK_M⌉ · ⌈N / BLOCK_N⌉), and on
 * nothing else. Returns how many row counts were checked.
 * @throws {EmitError} `bad-schedule` naming the first M and rank that breaks it.
 */
export function checkGemmArRows(s: RsRowsShape, waits: readonly (readonly Expr[])[], blockN: number, recvBase: number): number {
  const { world: W, blockM: BM, N } = s;
  const fns = waits.map((r) => r.map((e) => toFunction(e, [ROWS_VARIABLE])));
  const fail = (M: number, what: string): never => {
    throw new EmitError("bad-schedule", `GEMM+AllReduce over ${M} rows: ${what}`);
  };
  if (fns.length !== W) fail(s.min, `waits for ${fns.length} ranks, not ${W}`);
  let checked = 0;
  for (let M = s.min; M <= s.max; M += W) {
    checked += 1;
    const tiles = Math.ceil(M / W / BM) * Math.ceil(N / blockN);
    fns.forEach((pairs, r) => {
      const seen = new Set<number>();
      for (let i = 0; i < pairs.length; i += 2) {
        const [slot, arrivals] = [pairs[i]!(M), pairs[i + 1]!(M)];
        const q = slot - recvBase;
        if (!(q >= 0 && q < W) || q === r || seen.has(q)) fail(M, `rank ${r} waits on slot ${slot}`);
        if (arrivals !== tiles) fail(M, `rank ${r} waits for ${arrivals} tiles of rank ${q}'s slab, which stores ${tiles}`);
        seen.add(q);
      }
      if (seen.size !== W - 1) fail(M, `rank ${r} waits for ${seen.size} peers' slabs, not ${W - 1}`);
    });
  }
  return checked;
}
