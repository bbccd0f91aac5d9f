// GEMM + ReduceScatter's registry entry: the producer GEMM notifies each tile's slot after its
// stores and the plan's deliveries move whole row slabs to their owners, who reduce them
// (Triton: the local body transformed; TLX: the warp-specialised GEMM with tile-done notifies).
import type { OperatorDefinition } from "../../core/registry.js";
import { DEFAULT_TILE } from "../../core/operator.js";
import { anyRowsOptions, COMPUTE_SHARED, GEMM_SHARED } from "../gemm-cli.js";
import { realiseTlxGemmRs } from "./tlx.js";
import { compileGemmRsRows } from "./rows-compile.js";
import { compileGemmRs } from "./triton.js";

/** `gemm-rs`: `ReduceScatter(A @ B)`. */
export const gemmRs: OperatorDefinition = {
  name: "gemm-rs",
  summary:
    "GEMM, then ReduceScatter: each tile's partial rows delivered to their owner (copy engine or SM pushes) as the GEMM finishes them",
  kind: "gemm-rs",
  cli: {
    options: anyRowsOptions("SM pushes; --m is then the shape the manifest describes and the tuned table looks up"),
    shared: [...GEMM_SHARED, "tlx", "comm-sms", ...COMPUTE_SHARED],
    templates: ["direct", "ring"],
    examples: [
      "ovl emit gemm-rs --shape MLP-1 --world 8 --out rs --tlx",
      "ovl emit gemm-rs --shape MLP-2 --world 2 --backend sm",
      "ovl emit gemm-rs --n 4096 --k 2752 --m 8192 --world 4 --any-rows --out rs-any",
    ],
  },
  compute: {
    tuned: true,
    bodies: ["gemm_producer", "gemm_producer_tma", "gemm_producer_tma_flat"],
    defaultTile: () => ({ ...DEFAULT_TILE }),
  },
  realise: (op) => compileGemmRs(op),
  realiseRows: (op) => compileGemmRsRows(op, op.rows ?? {}),
  realiseTlx: (op) => realiseTlxGemmRs(op),
};
