// Builders for the BlockChannel and the program document, and slot allocation: handing out
// fresh signal slots to a producer/consumer relation without disturbing existing ones.
import type { SignalWidth } from "../model/common.js";
import {
  PRIMITIVES_SCHEMA,
  type BlockChannel,
  type PrimitiveProgram,
  type RelationKind,
  type SignalSlot,
  type SlotRelation,
} from "../model/channel.js";
import type { Primitive } from "../model/primitive.js";
import { epochTarget } from "../signals/epoch.js";
import { PrimitiveError } from "../validate/issues.js";
import { assertChannel, assertProgram } from "../validate/validate.js";

/**
 * A BlockChannel for `rank` of `worldSize`, with optional slots and relations (default
 * none; add them with {@link allocateSlots}).
 *
 * @throws PrimitiveError when the channel contradicts itself (rank outside the world, ...).
 */
export function blockChannel(args: {
  rank: number;
  worldSize: number;
  slots?: readonly SignalSlot[];
  relations?: readonly SlotRelation[];
}): BlockChannel {
  return assertChannel({
    rank: args.rank,
    worldSize: args.worldSize,
    slots: [...(args.slots ?? [])],
    relations: [...(args.relations ?? [])],
  });
}

/** What {@link allocateSlots} returns: the grown channel and the indices handed out. */
export interface SlotAllocation {
  /** The channel with the new slots and their relation added. */
  readonly channel: BlockChannel;
  /** The indices of the new slots, in order. */
  readonly slots: readonly number[];
}

/**
 * Allocate `count` fresh signal slots (indices after the highest in use) for a
 * producer/consumer relation, each expecting `arrivals` (default 1) per launch, `width`
 * bits wide (default 32; use 64 across nodes). Pure: returns a new channel.
 *
 * @throws PrimitiveError when `count < 1`, `arrivals < 1`, or the result is inconsistent.
 */
export function allocateSlots(
  channel: BlockChannel,
  args: { kind: RelationKind; producer: string; consumer: string; count: number; arrivals?: number; width?: SignalWidth },
): SlotAllocation {
  const first = channel.slots.reduce((m, s) => Math.max(m, s.index + 1), 0);
  const count = Number.isSafeInteger(args.count) && args.count >= 1 ? args.count : 0;
  if (count === 0) {
    throw new PrimitiveError([
      {
        code: "invalid-shape",
        path: ["count"],
        message: `allocate at least one slot (count must be an integer >= 1), got ${String(args.count)}`,
      },
    ]);
  }
  const slots = Array.from({ length: count }, (_, i) => first + i);
  const added: SignalSlot[] = slots.map((index) => ({ index, arrivals: args.arrivals ?? 1, width: args.width ?? 32 }));
  const relation: SlotRelation = { kind: args.kind, producer: args.producer, consumer: args.consumer, slots };
  const grown = assertChannel({
    ...channel,
    slots: [...channel.slots, ...added],
    relations: [...channel.relations, relation],
  });
  return { channel: grown, slots };
}

/**
 * The value a wait on `slot` targets in launch `epoch`: `epoch × arrivals mod 2^width` of
 * that slot (see `epochTarget`).
 *
 * @throws PrimitiveError (`unknown-slot`) when the channel has no such slot.
 */
export function waitTarget(channel: BlockChannel, slot: number, epoch: number | bigint): bigint {
  const s = channel.slots.find((x) => x.index === slot);
  if (s === undefined) {
    throw new PrimitiveError([
      {
        code: "unknown-slot",
        path: ["slot"],
        message: `signal slot ${slot} is not in the channel's slot configuration; allocate it first`,
      },
    ]);
  }
  return epochTarget(epoch, s.arrivals, s.width);
}

/**
 * An `ovl.primitives/v1` program: `primitives` run by `channel.rank`.
 *
 * @throws PrimitiveError listing every contradiction in the channel or the primitives.
 */
export function primitiveProgram(channel: BlockChannel, primitives: readonly Primitive[]): PrimitiveProgram {
  return assertProgram({ $schema: PRIMITIVES_SCHEMA, channel, primitives: [...primitives] });
}
