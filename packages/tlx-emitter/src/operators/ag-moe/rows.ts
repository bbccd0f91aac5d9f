// AllGather + MoE for any row count: M, the tokens of all ranks (each rank holds m = M / world of them), is a run-time
// argument. The tokens move by the swizzle push AllGather of AllGather+GEMM (`../ag-gemm/rows.ts`: chunk c of rank q is
// rows q·m + c·cs … with cs = ⌈m / split⌉, signalled in slot q·split + c); the grouped GEMM reads them through the
// routing's index table, so what was a per-M segment table (`segments.ts`) is the chunk itself: row → segment is
// `⌊row / m⌋·split + ⌊(row mod m) / cs⌋` (nondecreasing, `world·split` segments at every M) and segment s waits on
// slot s unless its rows are the rank's own. The routing tables' sizes (`moeAlignSizes`), the routing kernels'
// arguments, the body's block count and grid are @ovl/mapping expressions of M (`ovl_rows`), checked at every M served
// (`checkAgMoeRows`) before they are written.
import { add, ceilDiv, floorDiv, max, min, mod, mul, sub, toFunction, variable, type Expr, type VarExpr } from "@ovl/mapping";
import type { Rows } from "../../core/manifest/schema.js";
import type { MoeRouting } from "../../core/operator.js";
import { EmitError } from "../../core/writer/index.js";
import { GATHER_VARIABLES } from "../../local/index.js";
import { RANK_VARIABLE } from "../../local/program.js";
import { checkAgDeliveries, chunkSlotOfRow, eq, rowsCopies, rowsVariables, type AgRowsMaps, type RowsFail } from "../ag-gemm/rows.js";
import { MOE_ALIGN_MAX_PROGRAMS } from "./triton.js";

/** The row counts an AllGather + MoE serves, how its tokens are chunked, and its routing. */
export interface MoeRowsShape {
  readonly world: number;
  /** Chunks per rank's tokens. */
  readonly split: number;
  /** The routing's block (the body's `BLOCK_M`). */
  readonly blockM: number;
  /** Hidden: elements per token. */
  readonly K: number;
  /** Columns of the output per rank (the body's n-blocks are ⌈N / BLOCK_N⌉). */
  readonly N: number;
  readonly blockN: number;
  readonly routing: MoeRouting;
  /** Smallest and largest M served (multiples of the world). */
  readonly min: number;
  readonly max: number;
}

/** The symbolic pieces of an AllGather + MoE over M tokens (see the module comment). */
export interface MoeRowsMaps extends Pick<AgRowsMaps, "chunk"> {
  readonly M: VarExpr;
  /** Token slots M·k: the output's rows and the index table's padding sentinel. */
  readonly slots: Expr;
  /** Blocks of the worst routing, ⌈(M·k + E·(BLOCK_M − 1)) / BLOCK_M⌉: the body's m-blocks and its `MAX_BLOCKS`. */
  readonly maxBlocks: Expr;
  /** Slots and blocks each of the routing kernels' programs handles. */
  readonly perSlots: Expr;
  readonly perBlocks: Expr;
  /** Row → segment over `ovl_row` (nondecreasing; `segments` of them at every M). */
  readonly segment: Expr;
  /** The slot segment `ovl_seg` waits on, -1 for the rank's own rows. */
  readonly slot: Expr;
  /** Segments at every M: world · split. */
  readonly segments: number;
}

/** The fewest tokens per rank that keep every chunk non-empty. */
export function moeMinRowsPerRank(split: number): number {
  return split + (split - 1) ** 2;
}

/** The routing kernels' programs at every M (a fixed grid: their constexprs never change). */
export const MOE_ROWS_PROGRAMS = MOE_ALIGN_MAX_PROGRAMS;

/**
 * The expressions of {@link MoeRowsMaps} for `s`.
 * @throws {EmitError} `bad-param` for a range the maps cannot serve.
 */
export function moeRowsMaps(s: MoeRowsShape): MoeRowsMaps {
  const { world: W, split: S, blockM: BM } = s;
  // Chunks need no m-block here (a block's rows come from the index table): one row of each is enough.
  const { M, rank } = rowsVariables({ ...s, blockM: 1 }, true);
  const m = floorDiv(M, W);
  const cs = ceilDiv(m, S);
  const { slots, maxBlocks, perSlots, perBlocks } = moeRoutingMaps(M, s.routing, BM);
  const row = variable(GATHER_VARIABLES.row, { min: 0, max: s.max - 1 });
  const seg = variable(GATHER_VARIABLES.segment, { min: 0, max: W * S - 1 });
  const never = W * S + 1; // subtracted where a segment is the rank's own: the slot clamps to -1
  return {
    M,
    slots,
    maxBlocks,
    perSlots,
    perBlocks,
    segment: add(mul(floorDiv(row, m), S), floorDiv(mod(row, m), cs)),
    slot: max(-1, sub(seg, mul(never, eq(floorDiv(seg, S), rank)))),
    segments: W * S,
    chunk: (q, c) => {
      const start = add(mul(q, m), mul(c, cs));
      return { start, rows: sub(min(mul(c + 1, cs), m), mul(c, cs)) };
    },
  };
}

/** The routing's sizes over the token count `M` (ag-moe's and moe-rs's alike): see {@link MoeRowsMaps}. */
export type MoeRoutingMaps = Pick<MoeRowsMaps, "slots" | "maxBlocks" | "perSlots" | "perBlocks">;

/** {@link MoeRoutingMaps} over `M` for `routing` in blocks of `blockM` rows. */
export function moeRoutingMaps(M: Expr, routing: MoeRouting, blockM: number): MoeRoutingMaps {
  const slots = mul(M, routing.topk);
  const maxBlocks = ceilDiv(add(slots, routing.experts * (blockM - 1)), blockM);
  return { slots, maxBlocks, perSlots: ceilDiv(slots, MOE_ROWS_PROGRAMS), perBlocks: ceilDiv(maxBlocks, MOE_ROWS_PROGRAMS) };
}

/** A size over M the routing's check compares: what it is, its expression, and its value at M given the routing's blocks. */
export type RoutingSize = readonly [what: string, size: Expr, want: (blocks: number, M: number) => number];

/**
 * The check of `maps` (over the variable named `variable`) at one token count `M`: the routing's sizes against those
 * computed directly, then each of `more`; it returns the routing's most blocks at `M`.
 * @throws via `fail` naming the first size that differs.
 */
export function routingSizesCheck(
  variable: string,
  routing: MoeRouting,
  blockM: number,
  maps: MoeRoutingMaps,
  more: readonly RoutingSize[] = [],
): (fail: RowsFail, M: number) => number {
  const sizes: RoutingSize[] = [
    ["token slots", maps.slots, (_, M) => M * routing.topk],
    ["the routing's most blocks", maps.maxBlocks, (blocks) => blocks],
    ...more,
  ];
  const at = sizes.map(([, e]) => toFunction(e, [variable]));
  const [perSlots, perBlocks] = [toFunction(maps.perSlots, [variable]), toFunction(maps.perBlocks, [variable])];
  return (fail, M) => {
    const k = M * routing.topk;
    const blocks = Math.ceil((k + routing.experts * (blockM - 1)) / blockM);
    sizes.forEach(([what, , want], i) => {
      const got = at[i]!(M);
      if (got !== want(blocks, M)) fail(M, `${what}: ${got}, not ${want(blocks, M)}`);
    });
    if (perSlots(M) * MOE_ROWS_PROGRAMS < k || perBlocks(M) * MOE_ROWS_PROGRAMS < blocks)
      fail(M, `${MOE_ROWS_PROGRAMS} routing programs of ${perSlots(M)} slots and ${perBlocks(M)} blocks miss some of ${k} and ${blocks}`);
    return blocks;
  };
}

/** What {@link checkAgMoeRows} checks besides the maps: the host ops and the sizes the manifest writes over M. */
export interface MoeRowsPlan {
  readonly hostOps: Rows["hostOps"];
  /** Elements of the index table and entries of the block → expert table, over M. */
  readonly sortedIds: Expr;
  readonly expertOfBlock: Expr;
  /** The body's grid over M (its first dimension), or undefined for a persistent body (a fixed grid). */
  readonly grid?: Expr;
}

/**
 * Checks, at every M of the range, that the host ops deliver every other rank's tokens to each rank exactly once,
 * each chunk signalled in its slot (as AllGather+GEMM's, `checkAgDeliveries`); that row → segment is, at every token
 * row, its chunk's slot (so nondecreasing, and a block reading rows first..last waits on every chunk between them);
 * that on every rank segment s waits on slot s, written there, unless its rows are the rank's own; and that the
 * routing's sizes are those the routing kernels and the body need at M. Returns how many row counts were checked.
 * @throws {EmitError} `bad-schedule` naming the first M, rank and row, segment or size that breaks it.
 */
export function checkAgMoeRows(s: MoeRowsShape, maps: MoeRowsMaps, plan: MoeRowsPlan): number {
  const { world: W, split: S } = s;
  const over = (e: Expr, v: string[]) => toFunction(e, v);
  const rowVars = [maps.M.name, GATHER_VARIABLES.row];
  const segment = over(maps.segment, rowVars);
  const slot = over(maps.slot, [GATHER_VARIABLES.segment, RANK_VARIABLE]);
  const nBlocks = Math.ceil(s.N / s.blockN);
  const ops = rowsCopies(plan.hostOps);
  const fail: RowsFail = (M, what) => {
    throw new EmitError("bad-schedule", `AllGather+MoE over ${M} tokens: ${what}`);
  };
  // Segment s on rank r: slot s where another rank's rows lie, none (-1) on its own.
  for (let r = 0; r < W; r++)
    for (let g = 0; g < W * S; g++) {
      const want = Math.floor(g / S) === r ? -1 : g;
      if (slot(g, r) !== want) fail(s.min, `rank ${r} segment ${g} waits on slot ${slot(g, r)}, not ${want}`);
    }
  const sizes = routingSizesCheck(maps.M.name, s.routing, s.blockM, maps, [
    ["index table entries", plan.sortedIds, (blocks) => blocks * s.blockM],
    ["block → expert entries", plan.expertOfBlock, (blocks) => blocks],
    ...(plan.grid === undefined ? [] : [["the body's programs", plan.grid, (blocks: number) => blocks * nBlocks] as const]),
  ]);
  let checked = 0;
  for (let M = s.min; M <= s.max; M += W) {
    checked += 1;
    const written = checkAgDeliveries(fail, s, ops, M);
    for (let r = 0; r < W; r++)
      for (let g = 0; g < W * S; g++)
        if (Math.floor(g / S) !== r && !written[r]![g]) fail(M, `rank ${r} waits on slot ${g}, which nothing writes`);
    const slotOfRow = chunkSlotOfRow(M, W, S);
    for (let row = 0; row < M; row++) {
      const got = segment(M, row);
      if (got !== slotOfRow(row)) fail(M, `token row ${row} maps to segment ${got}, its chunk's slot is ${slotOfRow(row)}`);
    }
    sizes(fail, M);
  }
  return checked;
}
