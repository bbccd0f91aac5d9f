// The tensor-parallel MLP's registry entry: a chain of two operators (ag-gemm-silu, then
// gemm-rs reading the first one's output in place), compiled by `compileMlp` (chain.ts).
import type { OperatorDefinition } from "../../core/registry.js";
import { MLP_OPTIONS } from "./options.js";

/** `mlp`: `ReduceScatter((silu(AllGather(X) W_gate) * (AllGather(X) W_up)) W_down)`. */
export const mlp: OperatorDefinition = {
  name: "mlp",
  summary: "the tensor-parallel MLP as a chain: AllGather + gate/up GEMM + SiLU-mul, then GEMM + ReduceScatter",
  cli: {
    options: MLP_OPTIONS,
    shared: ["gemm-sizes", "dtype", "world", "mesh", "split", "tile", "target"],
    examples: ["ovl emit mlp --tokens 8192 --hidden 4096 --intermediate 1792 --world 8"],
  },
};
