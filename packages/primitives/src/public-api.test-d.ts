// Type tests of @ovl/primitives' public surface, as published: the package imports itself, so
// these check dist/index.d.ts (the declarations a user gets), not the sources. Run by `vitest`
// (typecheck mode, tsconfig.test-d.json) after the build.
import {
  type BlockChannel,
  type ConsumerTileWait,
  type IssuePath,
  type Primitive,
  type PRIMITIVE_ISSUE_CODES,
  type PrimitiveError,
  type PrimitiveIssue,
  type PrimitiveName,
  type PrimitiveProgram,
  type ProducerTileNotify,
  type SignalError,
  type SlotAllocation,
  type Validation,
  allocateSlots,
  assertPrimitive,
  blockChannel,
  consumerTileWait,
  epochTarget,
  primitiveProgram,
  producerTileNotify,
  reached,
  validatePrimitive,
  waitTarget,
} from "@ovl/primitives";
import { describe, expectTypeOf, it } from "vitest";

describe("@ovl/primitives public types", () => {
  it("builders take the README's arguments and return the primitive's own type", () => {
    expectTypeOf(producerTileNotify).returns.toEqualTypeOf<ProducerTileNotify>();
    expectTypeOf(consumerTileWait).returns.toEqualTypeOf<ConsumerTileWait>();
    expectTypeOf(producerTileNotify).toBeCallableWith({ tile: [3, 1], slot: 3 });
    expectTypeOf<ProducerTileNotify["primitive"]>().toEqualTypeOf<"producer_tile_notify">();
    expectTypeOf<Primitive["primitive"]>().toEqualTypeOf<PrimitiveName>();
    expectTypeOf<ProducerTileNotify>().toMatchTypeOf<Primitive>();
  });

  it("channels allocate slots and build programs", () => {
    expectTypeOf(blockChannel).returns.toEqualTypeOf<BlockChannel>();
    expectTypeOf(allocateSlots).parameter(0).toEqualTypeOf<BlockChannel>();
    expectTypeOf(allocateSlots).returns.toEqualTypeOf<SlotAllocation>();
    expectTypeOf<SlotAllocation["slots"]>().toEqualTypeOf<readonly number[]>();
    expectTypeOf(primitiveProgram).returns.toEqualTypeOf<PrimitiveProgram>();
    expectTypeOf(waitTarget).returns.toEqualTypeOf<bigint>();
  });

  it("validators return a value or every issue; asserting ones return the value", () => {
    expectTypeOf(validatePrimitive).returns.toEqualTypeOf<Validation<Primitive>>();
    expectTypeOf<Validation<Primitive>>().toEqualTypeOf<
      { readonly ok: true; readonly value: Primitive } | { readonly ok: false; readonly issues: readonly PrimitiveIssue[] }
    >();
    expectTypeOf(assertPrimitive).returns.toEqualTypeOf<Primitive>();
  });

  it("the signal arithmetic takes number | bigint and counts in bigint", () => {
    expectTypeOf(epochTarget).parameter(0).toEqualTypeOf<number | bigint>();
    expectTypeOf(epochTarget).returns.toEqualTypeOf<bigint>();
    expectTypeOf(reached).returns.toEqualTypeOf<boolean>();
  });

  it("errors carry closed code unions", () => {
    expectTypeOf<PrimitiveError["code"]>().toEqualTypeOf<(typeof PRIMITIVE_ISSUE_CODES)[number]>();
    expectTypeOf<PrimitiveError["code"]>().toEqualTypeOf<
      | "invalid-shape"
      | "wrong-side"
      | "acquire-on-notify"
      | "release-on-wait"
      | "relaxed-signal"
      | "ordered-data"
      | "rank-with-broadcast"
      | "p2p-without-rank"
      | "rank-outside-world"
      | "host-on-sm"
      | "tma-on-host"
      | "device-on-copy-engine"
      | "tma-on-signal"
      | "narrow-scope-across-ranks"
      | "unknown-slot"
      | "add-exceeds-arrivals"
      | "slot-relation-mismatch"
      | "arrivals-below-one"
      | "add-below-one"
      | "arrivals-exceed-half-range"
      | "duplicate-slot"
      | "relation-unknown-slot"
      | "slot-in-two-relations"
    >();
    expectTypeOf<PrimitiveError["path"]>().toEqualTypeOf<IssuePath>();
    expectTypeOf<PrimitiveError["issues"]>().toEqualTypeOf<readonly PrimitiveIssue[]>();
    expectTypeOf<SignalError["code"]>().toEqualTypeOf<"bad-width" | "bad-epoch" | "bad-arrivals" | "bad-add" | "not-an-integer">();
    expectTypeOf<PrimitiveError>().toMatchTypeOf<Error>();
  });
});
