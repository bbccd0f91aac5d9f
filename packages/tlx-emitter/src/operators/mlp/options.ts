// The MLP's sizes as command-line options (shared by `mlp` and its first stage, `ag-gemm-silu`).
import type { OptionDeclaration } from "../../core/registry.js";

/** `--tokens`, `--hidden`, `--intermediate` (or `--m`, `--k`, `--n`). */
export const MLP_OPTIONS: readonly OptionDeclaration[] = [
  { name: "tokens", type: "positive-int", value: "<T>", help: "tokens M of every rank together (--m too)" },
  { name: "hidden", type: "positive-int", value: "<H>", help: "hidden size (--k too)" },
  { name: "intermediate", type: "positive-int", value: "<I>", help: "this rank's intermediate columns (--n too)" },
];
