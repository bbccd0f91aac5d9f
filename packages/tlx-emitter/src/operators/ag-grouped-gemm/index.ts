// AllGather + grouped GEMM's registry entry: MoE experts whose rows are grouped contiguously
// per expert; the routing names the expert of every m-block, so the operator names its tile
// and is compiled through the API only (no flags state a per-m-block routing).
import type { OperatorDefinition } from "../../core/registry.js";
import { EmitError } from "../../core/writer/index.js";
import { compileAgGroupedGemm } from "./triton.js";

/** `ag-grouped-gemm`: `C[rows of e] = AllGather(A)[rows of e] @ B[e]`. */
export const agGroupedGemm: OperatorDefinition = {
  name: "ag-grouped-gemm",
  summary: "AllGather, then a grouped GEMM over expert-contiguous rows (the routing is an input of the API, not a flag)",
  kind: "ag-grouped-gemm",
  compute: {
    tuned: false,
    defaultTile(op) {
      throw new EmitError(
        "bad-param",
        `operator ${op.name}: ag-grouped-gemm needs an explicit tile (its routing names the expert of every BLOCK_M rows)`,
      );
    },
  },
  realise: (op) => compileAgGroupedGemm(op),
};
