// Dynamic mappings from MoE routing (TileLink §4.1 and Figure 5): `topk_ids` decides at run
// time which token rows each expert reads, so the rows are gathered expert by expert into
// lookup tables whose lengths are known when the kernel is emitted.
import { MappingError, checkSize } from "../errors.js";
import { add, variable, type VarExpr } from "../expr/expr.js";
import { dynamicMap, fillTable, lookupTable, type IndexMap, type LookupTable } from "../tables/table.js";

/** Name of the gathered-row variable of the MoE maps. */
export const ROW = "row";
/** Name of the expert variable of the MoE maps. */
export const EXPERT = "expert";

/** Tables and maps built from one routing decision. */
export interface MoeRouting {
  tables: {
    /** `gather_rows[i]`: token row of gathered row i; experts in order, tokens in order. */
    gatherRows: LookupTable;
    /** `expert_of_row[i]`: the expert gathered row i is routed to. */
    expertOfRow: LookupTable;
    /** `expert_offsets[e] .. expert_offsets[e + 1]`: gathered rows of expert e (length E + 1). */
    expertOffsets: LookupTable;
    /** `source_rank[i]`: rank that holds token gather_rows[i] (only with `worldSize`). */
    sourceRank?: LookupTable;
  };
  maps: {
    /** f_S of a gathered row: the token row it reads, `gather_rows[row]`. */
    tokenRow: IndexMap;
    /** The expert whose weights a gathered row multiplies, `expert_of_row[row]`. */
    expert: IndexMap;
    /** First gathered row of expert `expert`, `expert_offsets[expert]`. */
    expertStart: IndexMap;
    /** One past the last gathered row of expert `expert`, `expert_offsets[expert + 1]`. */
    expertEnd: IndexMap;
    /** f_R of a gathered row: the rank to pull its token from (only with `worldSize`). */
    sourceRank?: IndexMap;
  };
  /** The variables the maps index with: `row` in [0, M*topk) and `expert` in [0, E). */
  row: VarExpr;
  expert: VarExpr;
}

/** Options of {@link moeRoutingTables}. */
export interface MoeOptions {
  /** Ranks the tokens are sharded over (ceil(M / R) rows each); adds the source-rank table. */
  worldSize?: number;
}

/**
 * Builds the dynamic mappings of an AllGather + MoE from `topkIds` (`topkIds[token]` lists the
 * distinct experts of that token): for each expert the token rows routed to it, gathered in
 * token order, plus per-expert offsets. Throws `invalid-size` for no tokens or experts and
 * `invalid-routing` for an expert id outside `[0, numExperts)`, ragged or duplicate top-k.
 */
export function moeRoutingTables(topkIds: readonly (readonly number[])[], numExperts: number, options: MoeOptions = {}): MoeRouting {
  checkSize(numExperts, "numExperts");
  checkSize(topkIds.length, "number of tokens (topkIds.length)");
  const topk = checkSize(topkIds[0]?.length ?? 0, "top-k (topkIds[0].length)");
  const perExpert: number[][] = Array.from({ length: numExperts }, () => []);
  topkIds.forEach((ids, token) => {
    if (ids.length !== topk) {
      throw new MappingError("invalid-routing", `token ${token} has ${ids.length} experts, token 0 has ${topk}; top-k must be uniform`);
    }
    const seen = new Set<number>();
    for (const e of ids) {
      if (!Number.isInteger(e) || e < 0 || e >= numExperts) {
        throw new MappingError("invalid-routing", `token ${token} is routed to expert ${e}, outside [0, ${numExperts})`);
      }
      if (seen.has(e)) throw new MappingError("invalid-routing", `token ${token} lists expert ${e} twice`);
      seen.add(e);
      (perExpert[e] as number[]).push(token);
    }
  });
  const rows = perExpert.flat();
  const experts = perExpert.flatMap((tokens, e) => tokens.map(() => e));
  const offsets = [0];
  for (const tokens of perExpert) offsets.push((offsets[offsets.length - 1] as number) + tokens.length);

  const gatherRows = fillTable(lookupTable("gather_rows", rows.length), rows);
  const expertOfRow = fillTable(lookupTable("expert_of_row", rows.length), experts);
  const expertOffsets = fillTable(lookupTable("expert_offsets", numExperts + 1), offsets);
  const row = variable(ROW, { min: 0, max: rows.length - 1 });
  const expert = variable(EXPERT, { min: 0, max: numExperts - 1 });
  const routing: MoeRouting = {
    tables: { gatherRows, expertOfRow, expertOffsets },
    maps: {
      tokenRow: dynamicMap(gatherRows, row),
      expert: dynamicMap(expertOfRow, row),
      expertStart: dynamicMap(expertOffsets, expert),
      expertEnd: dynamicMap(expertOffsets, add(expert, 1)),
    },
    row,
    expert,
  };
  if (options.worldSize !== undefined) {
    const R = checkSize(options.worldSize, "worldSize");
    const perRank = Math.ceil(topkIds.length / R);
    const sourceRank = fillTable(
      lookupTable("source_rank", rows.length),
      rows.map((t) => Math.floor(t / perRank)),
    );
    routing.tables.sourceRank = sourceRank;
    routing.maps.sourceRank = dynamicMap(sourceRank, row);
  }
  return routing;
}
