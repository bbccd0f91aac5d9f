// The JSON Schema export of the `ovl.primitives/v1` contract, generated from the zod
// schemas so that non-TS compilers and the Python runner validate the same thing. The
// committed file schema/primitives.schema.json is this function's output.
import { z } from "zod";
import { BlockChannel, PRIMITIVES_SCHEMA, PrimitiveProgram, SignalSlot, SlotRelation } from "./channel.js";
import { RankRef, Resource, TileRef } from "./common.js";
import { Primitive } from "./primitive.js";

/** The JSON Schema (draft 2020-12) of a `ovl.primitives/v1` program, shared parts in `$defs`. */
export function primitivesJsonSchema(): Record<string, unknown> {
  const registry = z.registry<{ id: string }>();
  registry.add(Primitive, { id: "Primitive" });
  registry.add(BlockChannel, { id: "BlockChannel" });
  registry.add(SignalSlot, { id: "SignalSlot" });
  registry.add(SlotRelation, { id: "SlotRelation" });
  registry.add(RankRef, { id: "RankRef" });
  registry.add(TileRef, { id: "TileRef" });
  registry.add(Resource, { id: "Resource" });
  const body = z.toJSONSchema(PrimitiveProgram, { metadata: registry, target: "draft-2020-12" }) as Record<string, unknown>;
  return {
    ...body,
    title: PRIMITIVES_SCHEMA,
    description:
      "A program of TileLink tile-centric primitives on one rank: a BlockChannel (rank, world size, signal slots, relations) and the primitives. Shape only; @ovl/primitives' validateProgram checks the semantic rules.",
  };
}
