// @ovl/primitives: TileLink's tile-centric primitives (Table 3) as typed, serialisable
// values with their memory order, scope, mode and resource binding; the BlockChannel they
// run in; the monotone-epoch signal model; and validators that name what to fix.

export {
  Side,
  MemoryOrder,
  Scope,
  Mode,
  RankRef,
  TileRef,
  Resource,
  SignalWidth,
  type ResourceUnit,
} from "./model/common.js";
export {
  Primitive,
  type PrimitiveName,
  type NotifyPrimitive,
  type WaitPrimitive,
  type DataPrimitive,
  type ProducerTileNotify,
  type ConsumerTileWait,
  type PeerTileNotify,
  type PeerTileWait,
  type RankNotify,
  type RankWait,
  type TilePushData,
  type TilePullData,
  type RankCopyData,
  type RankBuffer,
} from "./model/primitive.js";
export {
  PRIMITIVES_SCHEMA,
  SignalSlot,
  RelationKind,
  SlotRelation,
  BlockChannel,
  PrimitiveProgram,
} from "./model/channel.js";
export { PRIMITIVES, PRIMITIVE_NAMES, type PrimitiveSpec, type PrimitiveRole } from "./semantics/table.js";
export { epochTarget, reached, afterNotify, SignalError, type SignalErrorCode } from "./signals/epoch.js";
export {
  producerTileNotify,
  consumerTileWait,
  peerTileNotify,
  peerTileWait,
  rankNotify,
  rankWait,
  tilePushData,
  tilePullData,
  rankCopyData,
  type TileInput,
  type RankInput,
  type PrimitiveOptions,
} from "./build/primitives.js";
export { blockChannel, allocateSlots, waitTarget, primitiveProgram, type SlotAllocation } from "./build/channel.js";
export {
  validatePrimitive,
  assertPrimitive,
  validateChannel,
  assertChannel,
  validateProgram,
  assertProgram,
} from "./validate/validate.js";
export { crossesRanks } from "./validate/rules.js";
export {
  PRIMITIVE_ISSUE_CODES,
  PrimitiveError,
  formatPath,
  type PrimitiveIssueCode,
  type PrimitiveIssue,
  type IssuePath,
  type Validation,
} from "./validate/issues.js";
export { TARGETS, DEFAULT_TARGET, target, type Target, type TargetName } from "./targets/targets.js";
