// AllToAll + GEMM's registry entry: every rank sends equal slabs of rows to every other, and
// the GEMM waits per arriving slab (Triton: the consumer body transformed), for one row count or
// for every row count of a range (`--any-rows`: M a run-time argument).
import type { OperatorDefinition } from "../../core/registry.js";
import { DEFAULT_TILE } from "../../core/operator.js";
import { anyRowsOptions, GEMM_SHARED } from "../gemm-cli.js";
import { compileA2aGemmRows } from "./rows-compile.js";
import { compileA2aGemm } from "./triton.js";

/** `a2a-gemm`: `AllToAll(A) @ B`. */
export const a2aGemm: OperatorDefinition = {
  name: "a2a-gemm",
  summary: "AllToAll, then GEMM: equal slabs of rows exchanged by copy-engine pushes, the GEMM waiting per arriving slab",
  kind: "a2a-gemm",
  cli: {
    options: anyRowsOptions("every rank's rows, sent and multiplied; --m is then the shape the manifest describes"),
    shared: GEMM_SHARED,
    templates: ["direct"],
    examples: [
      "ovl emit a2a-gemm --m 4096 --n 1024 --k 1024 --world 4",
      "ovl emit a2a-gemm --n 1024 --k 1024 --m 8192 --world 4 --any-rows --out a2a-any",
    ],
  },
  compute: { tuned: false, defaultTile: () => ({ ...DEFAULT_TILE }) },
  realise: (op) => compileA2aGemm(op),
  realiseRows: (op) => compileA2aGemmRows(op, op.rows ?? {}),
};
