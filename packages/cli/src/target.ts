// `ovl emit --target`: the GPU whose tuned compute configurations compile() reads.
import { TARGETS, type TargetName } from "@ovl/primitives";
import { UsageError } from "./errors.js";

/** The names `--target` takes (`h100`, `h200`, `b200`). */
export const TARGET_NAMES = Object.keys(TARGETS) as TargetName[];

/**
 * The target `--target` names, or undefined when the flag is absent.
 * @throws {UsageError} for a name that is not a target, listing those that are.
 */
export function parseTargetFlag(value: string | undefined): TargetName | undefined {
  if (value === undefined) return undefined;
  if ((TARGET_NAMES as string[]).includes(value)) return value as TargetName;
  throw new UsageError("usage", `--target must be one of ${TARGET_NAMES.join(", ")}, got '${value}' (for example: --target h200)`);
}
