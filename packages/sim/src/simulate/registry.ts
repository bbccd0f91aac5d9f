// Resolving a hardware model from a built-in's name or a plain object: the single-node
// built-ins (`HARDWARE_MODELS`) and the multi-node ones (`MULTI_NODE_MODELS`), zod-checked.
import { HARDWARE_MODELS, HardwareModel } from "./hardware.js";
import { MULTI_NODE_MODELS } from "./multi-node.js";
import { SimulateError } from "./errors.js";

/** Parse a hardware model (a built-in's name or a plain object), with a message naming the bad field. */
export function resolveHardware(input: HardwareModel | string): HardwareModel {
  if (typeof input === "string") {
    const model = HARDWARE_MODELS[input] ?? MULTI_NODE_MODELS[input];
    if (model === undefined) {
      const names = [...Object.keys(HARDWARE_MODELS), ...Object.keys(MULTI_NODE_MODELS)];
      throw new SimulateError(
        "bad-hardware",
        `unknown hardware model "${input}": use one of ${names.join(", ")} or pass a HardwareModel object`,
      );
    }
    return model;
  }
  const parsed = HardwareModel.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new SimulateError("bad-hardware", `hardware.${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data;
}
