// The MLP's first stage as one operator: AllGather of X, then the gate/up GEMM with SiLU-mul
// in its epilogue (what the torch API's kernel library compiles on its own).
import type { OperatorDefinition } from "../../core/registry.js";
import { DEFAULT_TILE } from "../../core/operator.js";
import { MLP_OPTIONS } from "../mlp/options.js";
import { compileAgGemmSilu } from "./triton.js";

/** `ag-gemm-silu`: `silu(AllGather(X) W_gate) * (AllGather(X) W_up)`. */
export const agGemmSilu: OperatorDefinition = {
  name: "ag-gemm-silu",
  summary: "the MLP's first stage alone: AllGather of X, gate/up GEMM and SiLU-mul",
  kind: "ag-gemm-silu",
  cli: {
    options: MLP_OPTIONS,
    shared: ["gemm-sizes", "dtype", "world", "mesh", "split", "backend", "tile"],
    examples: ["ovl emit ag-gemm-silu --tokens 4096 --hidden 4096 --intermediate 1376 --world 2"],
  },
  compute: { tuned: false, defaultTile: () => ({ ...DEFAULT_TILE }) },
  realise: (op) => compileAgGemmSilu(op),
};
