// The public validators: parse unknown input with the schemas, then apply the semantic
// rules, collecting every problem. Each has a throwing twin for callers that prefer
// exceptions; builders use those.
import { BlockChannel, PrimitiveProgram } from "../model/channel.js";
import { Primitive } from "../model/primitive.js";
import { issuesFromZod, unwrap, type IssuePath, type PrimitiveIssue, type Validation } from "./issues.js";
import { channelRules, primitiveRules } from "./rules.js";

function failOrValue<T>(value: T, issues: readonly PrimitiveIssue[]): Validation<T> {
  return issues.length === 0 ? { ok: true, value } : { ok: false, issues };
}

/**
 * Validate one primitive: its shape, then the rules of TileLink §3.2 (release on notify,
 * acquire on wait, a rank for p2p, none for broadcast, host on copy engine, device on SMs,
 * `sys` scope across ranks). With `channel`, also its ranks against the world and its slot
 * against the channel's slot configuration.
 */
export function validatePrimitive(value: unknown, channel?: BlockChannel, path: IssuePath = []): Validation<Primitive> {
  const parsed = Primitive.safeParse(value);
  if (!parsed.success) return { ok: false, issues: issuesFromZod(parsed.error, path) };
  return failOrValue(parsed.data, primitiveRules(parsed.data, channel, path));
}

/** {@link validatePrimitive}, throwing a `PrimitiveError` that lists every issue. */
export function assertPrimitive(value: unknown, channel?: BlockChannel): Primitive {
  return unwrap(validatePrimitive(value, channel));
}

/**
 * Validate a BlockChannel: its shape, its rank inside the world, slot indices unique,
 * arrivals >= 1 and within half a counter's range, relations over configured slots only
 * and no slot shared by two relations.
 */
export function validateChannel(value: unknown, path: IssuePath = []): Validation<BlockChannel> {
  const parsed = BlockChannel.safeParse(value);
  if (!parsed.success) return { ok: false, issues: issuesFromZod(parsed.error, path) };
  return failOrValue(parsed.data, channelRules(parsed.data, path));
}

/** {@link validateChannel}, throwing a `PrimitiveError` that lists every issue. */
export function assertChannel(value: unknown): BlockChannel {
  return unwrap(validateChannel(value));
}

/**
 * Validate an `ovl.primitives/v1` program: the channel, then every primitive against it.
 * Issues from all primitives are reported together, each with its path
 * (`primitives[3].order`).
 */
export function validateProgram(value: unknown): Validation<PrimitiveProgram> {
  const parsed = PrimitiveProgram.safeParse(value);
  if (!parsed.success) return { ok: false, issues: issuesFromZod(parsed.error, []) };
  const program = parsed.data;
  const issues = [
    ...channelRules(program.channel, ["channel"]),
    ...program.primitives.flatMap((p, i) => primitiveRules(p, program.channel, ["primitives", i])),
  ];
  return failOrValue(program, issues);
}

/** {@link validateProgram}, throwing a `PrimitiveError` that lists every issue. */
export function assertProgram(value: unknown): PrimitiveProgram {
  return unwrap(validateProgram(value));
}
