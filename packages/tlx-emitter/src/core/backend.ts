// The backend contract (one value `compile()` takes): a backend realises an operator as
// kernel sources plus a manifest, or says why it cannot.
import type { TargetName } from "@ovl/primitives";
import type { Operator, OperatorInput } from "./operator.js";
import type { EmitResult } from "./result.js";

/** Version of the backend contract a backend implements. */
export const BACKEND_SPECIFICATION = "ovl.backend/v1" as const;

/** A way of turning an operator into kernels and a manifest. */
export interface Backend {
  readonly specificationVersion: typeof BACKEND_SPECIFICATION;
  /** Short name (`triton`, `tlx`), as `ovl emit --backend` takes it. */
  readonly name: string;
  /**
   * A backend that delegates: the backend to compile `op` with (tuned by that backend's
   * configuration), decided before the compute configuration is resolved. Absent: this one.
   */
  select?(op: OperatorInput, target: TargetName): Backend;
  /** Why this backend cannot realise `op` (checked before anything is emitted), or undefined. */
  refusal(op: Operator): string | undefined;
  /** The kernel sources and manifest of `op`. Called only when `refusal(op)` is undefined. */
  realise(op: Operator): Promise<EmitResult>;
}
