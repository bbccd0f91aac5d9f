// Lowering a chunk plan to tile schedules (AutoOverlap §5.2): per rank, the order a
// compute kernel visits its tiles and the slots each tile waits on or notifies.
export { TileScheduleError, type TileScheduleErrorCode } from "./errors.js";
export { ComputeTiling, type ComputeTilingInput, type TileRole, type TileGrid } from "./tiling.js";
export {
  TILE_SCHEDULE_SCHEMA,
  TileSchedule,
  RankTileSchedule,
  TileTables,
  TileMaps,
  tileScheduleJsonSchema,
} from "./schema.js";
export { lowerToTileSchedule, applyTileArrivals, type LowerOptions } from "./lower.js";
export { checkTileSchedule, type TileScheduleIssue, type TileScheduleIssueCode } from "./check.js";
