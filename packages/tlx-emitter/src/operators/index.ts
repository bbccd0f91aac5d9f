// The operator registry: every operator folder's entry, listed once. compile() realises an
// operator through its entry, the tuned configurations read its compute defaults, and
// `ovl emit <operator>` is generated from the entries that declare command-line options.
import type { OperatorKind } from "../core/operator.js";
import type { OperatorDefinition } from "../core/registry.js";
import { EmitError } from "../core/writer/index.js";
import { a2aGemm } from "./a2a-gemm/index.js";
import { agAttention } from "./ag-attention/index.js";
import { agGemmSilu } from "./ag-gemm-silu/index.js";
import { agGemm } from "./ag-gemm/index.js";
import { agGroupedGemm } from "./ag-grouped-gemm/index.js";
import { agMoe } from "./ag-moe/index.js";
import { gemmAr } from "./gemm-ar/index.js";
import { gemmRs } from "./gemm-rs/index.js";
import { mlp } from "./mlp/index.js";
import { moeRs } from "./moe-rs/index.js";

/** Every operator, in the order `ovl emit --help` lists them. */
export const OPERATOR_REGISTRY: readonly OperatorDefinition[] = [
  agGemm,
  gemmRs,
  gemmAr,
  a2aGemm,
  agGroupedGemm,
  agMoe,
  moeRs,
  agAttention,
  agGemmSilu,
  mlp,
];

/**
 * The entry of a compiled kind (with its compute defaults and Triton realisation).
 * @throws {EmitError} `unsupported-op` for a kind no entry compiles.
 */
export function operatorDefinition(kind: OperatorKind): OperatorDefinition & Required<Pick<OperatorDefinition, "compute" | "realise">> {
  const def = OPERATOR_REGISTRY.find((d) => d.kind === kind);
  if (def?.compute === undefined || def.realise === undefined)
    throw new EmitError(
      "unsupported-op",
      `no operator compiles kind ${String(kind)}; known: ${OPERATOR_REGISTRY.map((d) => d.name).join(", ")}`,
    );
  return def as OperatorDefinition & Required<Pick<OperatorDefinition, "compute" | "realise">>;
}
