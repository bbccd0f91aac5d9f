// AllGather + GEMM's registry entry: the gathered A's rows arrive chunk by chunk while the
// consumer GEMM computes the m-blocks already here (Triton: the local body transformed; TLX:
// the warp-specialised GEMM with chunk waits before a tile's loads).
import type { OperatorDefinition } from "../../core/registry.js";
import { DEFAULT_TILE } from "../../core/operator.js";
import { anyRowsOptions, COMPUTE_SHARED, GEMM_SHARED } from "../gemm-cli.js";
import { realiseTlxAgGemm } from "./tlx.js";
import { compileAgGemmRows } from "./rows-compile.js";
import { compileAgGemm } from "./triton.js";
import { FP8_BODY, FP8_TILE } from "./fp8.js";
import { isFp8 } from "../../core/dtype.js";

/** `ag-gemm`: `C = AllGather(A) @ B` (fp8e4m3: `C = (AllGather(A) @ B) · scale_a · scale_b`, see `fp8.ts`). */
export const agGemm: OperatorDefinition = {
  name: "ag-gemm",
  summary: "AllGather, then GEMM: A's rows gathered over a swizzle or ring while the GEMM consumes the chunks that arrived",
  kind: "ag-gemm",
  cli: {
    options: anyRowsOptions("--m is then the shape the manifest describes and the tuned table looks up"),
    shared: [...GEMM_SHARED, "tlx", "comm-sms", ...COMPUTE_SHARED],
    templates: ["swizzle", "ring", "hierarchical", "direct"],
    examples: [
      "ovl emit ag-gemm --shape MLP-1 --world 4 --out mlp1 --tlx",
      "ovl emit ag-gemm --shape MLP-1 --world 4 --kernel my_matmul.py --plan my_plan.json",
      "ovl emit ag-gemm --n 2752 --k 4096 --m 8192 --world 4 --any-rows --out ag-any",
    ],
  },
  compute: {
    tuned: true,
    bodies: ["gemm_tma_persistent", "gemm_tma_persistent_flat", "gemm_tma_persistent_streamk", FP8_BODY],
    // fp8 has no tuned entries (1-byte operands): its own default tile.
    defaultTile: (op) => (isFp8(op.options?.dtype ?? "bf16") ? { ...FP8_TILE } : { ...DEFAULT_TILE }),
  },
  realise: (op) => compileAgGemm(op),
  realiseRows: (op) => compileAgGemmRows(op, op.rows ?? {}),
  realiseTlx: (op, options) => realiseTlxAgGemm(op, options),
};
