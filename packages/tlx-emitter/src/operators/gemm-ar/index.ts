// GEMM + AllReduce's registry entry: partitioned (a ReduceScatter of the partial rows, then an
// AllGather of the reduced slabs) or tile-wise (DistFuse's per-tile reduction by SM pushes).
import type { OperatorDefinition } from "../../core/registry.js";
import { DEFAULT_TILE } from "../../core/operator.js";
import { anyRowsOptions, GEMM_SHARED } from "../gemm-cli.js";
import { compileGemmArRows } from "./rows-compile.js";
import { compileGemmAr } from "./triton.js";

/** `gemm-ar`: `AllReduce(A @ B)`. */
export const gemmAr: OperatorDefinition = {
  name: "gemm-ar",
  summary: "GEMM, then AllReduce: partitioned (ReduceScatter + AllGather, --template direct) or tile-wise (--template tilewise, SM pushes)",
  kind: "gemm-ar",
  cli: {
    options: anyRowsOptions("partitioned, SM pushes and stores; --m is then the shape the manifest describes"),
    shared: [...GEMM_SHARED, "comm-sms"],
    templates: ["direct", "tilewise"],
    examples: ["ovl emit gemm-ar --shape MLP-1 --world 4 --backend sm", "ovl emit gemm-ar --shape MLP-1 --world 4 --template tilewise"],
  },
  compute: { tuned: false, defaultTile: () => ({ ...DEFAULT_TILE }) },
  realise: (op) => compileGemmAr(op),
  realiseRows: (op) => compileGemmArRows(op, op.rows ?? {}),
};
