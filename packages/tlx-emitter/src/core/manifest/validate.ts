// The last step of every emitter: the manifest must satisfy the `ovl.manifest/v1` zod
// schema, so a runner never sees a manifest its own validator would refuse.
import { Manifest } from "./schema.js";
import { EmitError } from "../writer/index.js";

/** `m` parsed by the `Manifest` schema. @throws {EmitError} `bad-manifest` with the first issue. */
export function validated(m: unknown): Manifest {
  const r = Manifest.safeParse(m);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new EmitError(
      "bad-manifest",
      `emitted manifest fails ovl.manifest/v1 at ${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`,
    );
  }
  return r.data;
}
