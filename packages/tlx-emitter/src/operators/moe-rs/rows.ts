// MoE + ReduceScatter for any token count: T, all ranks' tokens (each rank owns m = T / world of them), is a run-time
// argument. The slabs keep their number (world · S, S per rank, from the plan at the operator's T) and grow with T:
// slab x is tokens x·T/(world·S) …, owned by rank ⌊x / S⌋, so a token row's segment is `⌊row / slabT⌋` with slabT an
// expression of T, the owners and the signal slots are the same at every T, and the routing's sizes, the runner
// kernels' int arguments, grids and template params become @ovl/mapping expressions of T (`ovl_rows`). The plan is
// checked at every T served (`checkMoeRsRows`): the slabs against the rows each rank owns, and every kernel, buffer and
// gather size over T against what the per-T compile (`moeRsLayout` at that T's sizes) writes.
import { ceilDiv, floorDiv, mul, toFunction, variable, type Expr, type VarExpr } from "@ovl/mapping";
import type { Buffer, Kernel, Rows } from "../../core/manifest/schema.js";
import type { MoeRouting } from "../../core/operator.js";
import { EmitError } from "../../core/writer/index.js";
import { GATHER_VARIABLES } from "../../local/index.js";
import { rowsVariables, type RowsFail } from "../ag-gemm/rows.js";
import { moeRoutingMaps, routingSizesCheck, type MoeRoutingMaps } from "../ag-moe/rows.js";
import { MOE_RS_DEFAULT_BT, TOPK_SUM_BLOCK } from "./triton.js";

/** The token counts a moe-rs operator serves and the sizes its maps derive from. */
export interface MoeRsRowsShape {
  readonly world: number;
  /** Slabs per rank (every token count). */
  readonly slabsPerRank: number;
  readonly blockM: number;
  /** The reducer's token block. */
  readonly blockT?: number;
  readonly hidden: number;
  readonly blockN: number;
  readonly routing: MoeRouting;
  /** Smallest and largest T served (multiples of world · slabsPerRank). */
  readonly min: number;
  readonly max: number;
}

/** The symbolic pieces of a moe-rs operator over T tokens (see the module comment). */
export interface MoeRsRowsMaps extends MoeRoutingMaps {
  readonly M: VarExpr;
  /** T / world: each rank's output rows. */
  readonly rowsPerRank: Expr;
  /** T / (world · S): tokens of one slab. */
  readonly slabT: Expr;
  /** Token row → slab over `ovl_row`. */
  readonly segment: Expr;
  /** The reducer's items on each rank: S · ⌈slabT / BT⌉ · n-tiles. */
  readonly reduceItems: Expr;
  /** The launch TopK-sum's programs: ⌈T / 32⌉ · ⌈H / its BN⌉. */
  readonly topkSumPrograms: Expr;
  /** Slabs at every T: world · S. */
  readonly slabs: number;
}

/**
 * The expressions of {@link MoeRsRowsMaps} for `s`.
 * @throws {EmitError} `bad-param` for a range that is not of multiples of world · S from world · S on.
 */
export function moeRsRowsMaps(s: MoeRsRowsShape): MoeRsRowsMaps {
  const slabs = s.world * s.slabsPerRank;
  // Every slab at least one token: the range in multiples of the slabs, from one token a slab.
  const { M } = rowsVariables({ world: slabs, split: 1, blockM: 1, min: s.min, max: s.max }, true);
  const slabT = floorDiv(M, slabs);
  const nTiles = Math.ceil(s.hidden / s.blockN);
  const sumBN = Math.min(TOPK_SUM_BLOCK.BN, 2 ** Math.ceil(Math.log2(Math.max(1, s.hidden))));
  return {
    M,
    ...moeRoutingMaps(M, s.routing, s.blockM),
    rowsPerRank: floorDiv(M, s.world),
    slabT,
    segment: floorDiv(variable(GATHER_VARIABLES.row, { min: 0, max: s.max - 1 }), slabT),
    reduceItems: mul(mul(ceilDiv(slabT, s.blockT ?? MOE_RS_DEFAULT_BT), s.slabsPerRank), nTiles),
    topkSumPrograms: mul(ceilDiv(M, TOPK_SUM_BLOCK.BT), Math.ceil(s.hidden / sumBN)),
    slabs,
  };
}

/** The manifest at one T as the per-T compile writes it: its buffers and kernels. */
export interface MoeRsAt {
  readonly buffers: readonly Buffer[];
  readonly kernels: readonly Kernel[];
}

/** What {@link checkMoeRsRows} checks over T: the symbolic manifest's buffers, kernels and `rows` expressions. */
export interface MoeRsRowsPlan extends MoeRsAt {
  readonly rows: Pick<Rows, "buffers" | "kernels" | "numPidM">;
}

/**
 * Checks, at every T of the range: that the slabs tile the tokens, each slab inside the rows of the rank that owns it
 * (slab ⌊row / slabT⌋ is owned by ⌊slab / S⌋, the rank whose T / world rows hold the row), every slab non-empty; the
 * routing's sizes; and that the symbolic manifest (`plan`: its kernels, buffers and `rows` expressions evaluated at
 * T) is what the per-T compile `at(T)` writes — every int argument, constexpr, numeric grid, template param, buffer
 * shape and gather size, a persistent grid's cap at least the per-T one. Returns how many token counts were checked.
 * @throws {EmitError} `bad-schedule` naming the first T and what differs.
 */
export function checkMoeRsRows(s: MoeRsRowsShape, maps: MoeRsRowsMaps, plan: MoeRsRowsPlan, at: (T: number) => MoeRsAt): number {
  const v = maps.M.name;
  const fail: RowsFail = (T, what) => {
    throw new EmitError("bad-schedule", `MoE+ReduceScatter over ${T} tokens: ${what}`);
  };
  const one = (e: Expr) => toFunction(e, [v]);
  const segment = toFunction(maps.segment, [v, GATHER_VARIABLES.row]);
  const sizes = routingSizesCheck(v, s.routing, s.blockM, maps, [["the body's m-blocks", plan.rows.numPidM, (blocks) => blocks]]);
  const buffers = Object.entries(plan.rows.buffers).map(([name, e]) => [name, one(e)] as const);
  const kernels = new Map(
    Object.entries(plan.rows.kernels ?? {}).map(([name, k]) => {
      const ex = (r: Record<string, Expr> | undefined) => new Map(Object.entries(r ?? {}).map(([n, e]) => [n, one(e)] as const));
      return [
        name,
        {
          args: ex(k.args),
          params: ex(k.params),
          grid: k.grid?.map(one),
          gather: k.gather && { limit: one(k.gather.limit), rowCount: one(k.gather.rowCount) },
        },
      ];
    }),
  );
  let checked = 0;
  for (let T = s.min; T <= s.max; T += maps.slabs) {
    checked += 1;
    sizes(fail, T);
    const m = T / s.world;
    let last = -1;
    for (let row = 0; row < T; row++) {
      const x = segment(T, row);
      if (x !== last && x !== last + 1) fail(T, `token row ${row} is in slab ${x} after slab ${last}: the slabs do not tile the tokens`);
      if (Math.floor(x / s.slabsPerRank) !== Math.floor(row / m))
        fail(
          T,
          `token row ${row} is in slab ${x}, owned by rank ${Math.floor(x / s.slabsPerRank)}, but rank ${Math.floor(row / m)} owns the row`,
        );
      last = x;
    }
    if (last !== maps.slabs - 1) fail(T, `the tokens fill ${last + 1} slabs, not ${maps.slabs}`);
    const want = at(T);
    for (const b of want.buffers) {
      const symbolic = plan.buffers.find((x) => x.name === b.name);
      const e = buffers.find(([n]) => n === b.name)?.[1];
      const got = e === undefined ? symbolic?.shape[0] : e(T);
      if (symbolic === undefined || got !== b.shape[0] || JSON.stringify(symbolic.shape.slice(1)) !== JSON.stringify(b.shape.slice(1)))
        fail(T, `buffer ${b.name} has ${got} rows, the per-T compile ${b.shape[0]}`);
    }
    for (const k of want.kernels) {
      const symbolic = plan.kernels.find((x) => x.name === k.name);
      if (symbolic === undefined) fail(T, `the per-T compile launches ${k.name}, which the operator lacks`);
      const over = kernels.get(k.name);
      for (const a of k.args) {
        if (a.value.kind !== "int") continue;
        const e = over?.args.get(a.name);
        const sa = symbolic.args.find((x) => x.name === a.name)?.value;
        const got = e === undefined ? (sa?.kind === "int" ? sa.value : undefined) : e(T);
        if (got !== a.value.value) fail(T, `${k.name}'s ${a.name} is ${got}, the per-T compile's ${a.value.value}`);
      }
      if (JSON.stringify(symbolic.constexprs) !== JSON.stringify(k.constexprs))
        fail(T, `${k.name}'s constexprs are not the per-T compile's`);
      for (const [name, value] of Object.entries(k.template.params)) {
        const e = over?.params.get(name);
        const got = e === undefined ? symbolic.template.params[name] : e(T);
        if (got !== value) fail(T, `${k.name}'s template param ${name} is ${String(got)}, the per-T compile's ${String(value)}`);
      }
      k.grid.forEach((d, i) => {
        const sd = symbolic.grid[i];
        if (typeof d === "number") {
          const got = over?.grid?.[i]?.(T) ?? sd;
          if (got !== d) fail(T, `${k.name}'s grid[${i}] is ${JSON.stringify(got)}, the per-T compile's ${d}`);
        } else if (typeof sd !== "object" || sd.kind !== d.kind || (d.cap !== undefined && (sd.cap ?? Infinity) < d.cap))
          fail(T, `${k.name}'s persistent grid[${i}] ${JSON.stringify(sd)} does not cover the per-T compile's ${JSON.stringify(d)}`);
      });
      const g = k.tileProgram?.gather;
      if (g !== undefined && (over?.gather?.limit(T) !== g.limit || over.gather.rowCount(T) !== g.rowCount))
        fail(T, `${k.name}'s gather limit and row count are not the per-T compile's ${g.limit} and ${g.rowCount}`);
    }
  }
  return checked;
}
