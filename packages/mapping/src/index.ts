// Public surface of @ovl/mapping: symbolic integer expressions and TileLink's tile-centric
// shape, rank and channel maps (static and dynamic), their analyses and printers.
export { MappingError } from "./errors.js";
export type { MappingErrorCode } from "./errors.js";
export {
  ExprSchema,
  parseExpr,
  constant,
  variable,
  add,
  sub,
  mul,
  floorDiv,
  ceilDiv,
  mod,
  min,
  max,
  freeVariables,
  variableRanges,
  toExpr,
} from "./expr/expr.js";
export type { Expr, ExprLike, Range, ConstExpr, VarExpr, NaryExpr, DivExpr } from "./expr/expr.js";
export { isValidIdentifier, PYTHON_KEYWORDS } from "./expr/identifier.js";
export { evaluate } from "./expr/evaluate.js";
export { substitute, toFunction } from "./expr/substitute.js";
export type { Env } from "./expr/evaluate.js";
export { bounds } from "./expr/bounds.js";
export { simplify } from "./expr/simplify.js";
export { toPython, toTypeScript } from "./expr/print.js";
export type { PythonDialect, PythonOptions } from "./expr/print.js";
export {
  LookupTableSchema,
  IndexMapSchema,
  lookupTable,
  fillTable,
  staticMap,
  dynamicMap,
  evaluateMap,
  mapToPython,
} from "./tables/table.js";
export type { LookupTable, TableDtype, IndexMap, TableValues } from "./tables/table.js";
export { recoverAffine } from "./tables/affine.js";
export { staticIfAffine } from "./tables/affine.js";
export { recoverRankAffine } from "./tables/rank-affine.js";
export type { RankTables } from "./tables/rank-affine.js";
export {
  TILE,
  RANK,
  ShapeMapSchema,
  RankMapSchema,
  ChannelMapSchema,
  TileMappingSchema,
  tileBox,
  tileRank,
  tileChannel,
} from "./maps/tile-maps.js";
export type { DimRange, ShapeMap, RankMap, ChannelMap, TileMapping, MapEvalOptions, Box } from "./maps/tile-maps.js";
export {
  allGatherPull,
  allGatherPush,
  reduceScatterRing,
  allToAll,
  matrixTiles,
  rowSharding,
} from "./maps/collectives.js";
export type { CollectiveTiling, GatherOrder, MatrixTiling } from "./maps/collectives.js";
export { moeRoutingTables, ROW, EXPERT } from "./maps/moe.js";
export type { MoeRouting, MoeOptions } from "./maps/moe.js";
export { coversExactlyOnce, exactCover } from "./analysis/cover.js";
export type { CoverageIssue, CoverageReport } from "./analysis/cover.js";
export { rankMapConsistent } from "./analysis/sharding.js";
export type { ShardRange, RankReport, RankCheckOptions } from "./analysis/sharding.js";
export { consumerWaits } from "./analysis/waits.js";
export type { WaitReport, WaitOptions } from "./analysis/waits.js";
