// Buffer names of the GEMM+RS manifests (the direct and the hierarchical one share them).

/** Buffers of the GEMM+RS manifest besides the plan's partial tensor and the signals. */
export const GEMM_RS_BUFFERS = { a: "gemm_a", b: "gemm_b", partials: "partials", out: "rs_out" } as const;
