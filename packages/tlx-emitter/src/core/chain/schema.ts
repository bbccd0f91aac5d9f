// `ovl.chain/v1`: operators run back to back as one call, each stage an `ovl.manifest/v1` in
// its own folder, where a buffer of a later stage IS a buffer of an earlier one (the same
// memory, no copy). The runner loads every stage, checks the links and runs the stages in
// order on each rank, checking the chain's end result against its own reference.
import { z } from "zod";
import { Identifier } from "../manifest/schema.js";

/** Version tag of the chain format. */
export const CHAIN_SCHEMA = "ovl.chain/v1" as const;

const Positive = z.number().int().positive();

/** A stage's manifest: a relative path of plain name segments (no `..`, no absolute path). */
const StagePath = z
  .string()
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]*(\/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$/, "must be a relative path of plain segments")
  .refine((s) => !s.split("/").includes(".."), "must not leave the chain's folder");

/** One operator of the chain: its name and the manifest (relative to the chain file). */
export const ChainStage = z.object({ name: Identifier, manifest: StagePath });
export type ChainStage = z.infer<typeof ChainStage>;

/** A buffer of one stage. */
export const StageBuffer = z.object({ stage: z.number().int().nonnegative(), buffer: Identifier });
export type StageBuffer = z.infer<typeof StageBuffer>;

/** `to` (a later stage's buffer) is the memory of `from` (an earlier stage's): same shape and dtype on every rank. */
export const ChainLink = z.object({ from: StageBuffer, to: StageBuffer });
export type ChainLink = z.infer<typeof ChainLink>;

/**
 * What the chain computes, end to end. `mlp`: the tensor-parallel MLP with row-sharded X
 * `[M, hidden]`, each rank's W_gate|up `[hidden, 2·intermediate]` (its columns of both) and
 * W_down `[intermediate, hidden]` (its rows); every rank's output is its slab of
 * `Σ_r (silu(X W_gate,r) ⊙ (X W_up,r)) W_down,r`. `inputs` name, by role (`X`, `W_gate_up`,
 * `W_down`), the stage buffers holding them; `output` the stage buffer of the result.
 */
export const ChainReference = z.object({
  operator: z.enum(["mlp"]),
  M: Positive,
  hidden: Positive,
  intermediate: Positive,
  inputs: z.record(Identifier, StageBuffer),
  output: StageBuffer,
  tolerance: z.number().positive(),
});
export type ChainReference = z.infer<typeof ChainReference>;

/** A complete chain file. */
export const Chain = z.object({
  $schema: z.literal(CHAIN_SCHEMA),
  name: Identifier,
  world: Positive,
  dtype: z.enum(["bf16", "fp16", "fp32"]),
  stages: z.array(ChainStage).min(2),
  links: z.array(ChainLink).min(1),
  reference: ChainReference,
});
export type Chain = z.infer<typeof Chain>;

/** `Chain` as a JSON Schema object, for the runner. */
export function chainJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(Chain) as Record<string, unknown>;
}

/** The text of `schema/chain.schema.json`: 2-space indent and a final newline. */
export function chainJsonSchemaText(): string {
  return `${JSON.stringify(chainJsonSchema(), null, 2)}\n`;
}
