// AllToAll + GEMM's registry entry: every rank sends equal slabs of rows to every other, and
// the GEMM waits per arriving slab (Triton: the consumer body transformed).
import type { OperatorDefinition } from "../../core/registry.js";
import { DEFAULT_TILE } from "../../core/operator.js";
import { GEMM_SHARED } from "../gemm-cli.js";
import { compileA2aGemm } from "./triton.js";

/** `a2a-gemm`: `AllToAll(A) @ B`. */
export const a2aGemm: OperatorDefinition = {
  name: "a2a-gemm",
  summary: "AllToAll, then GEMM: equal slabs of rows exchanged by copy-engine pushes, the GEMM waiting per arriving slab",
  kind: "a2a-gemm",
  cli: {
    options: [],
    shared: GEMM_SHARED,
    templates: ["direct"],
    examples: ["ovl emit a2a-gemm --m 4096 --n 1024 --k 1024 --world 4"],
  },
  compute: { tuned: false, defaultTile: () => ({ ...DEFAULT_TILE }) },
  realise: (op) => compileA2aGemm(op),
};
