// The workload shapes of the benchmark suites (TileLink Table 4; S = tokens, H = hidden,
// I = intermediate). AG+GEMM: A[S/W × H] gathered, times B[H × I/W]. GEMM+RS:
// A[S × I/W] times B[I/W × H], reduce-scattered over S.
export const MLP_SHAPES = {
  "MLP-1": { S: 8192, H: 4096, I: 11008, model: "LLaMA-7B" },
  "MLP-2": { S: 8192, H: 4096, I: 14336, model: "LLaMA-3.1-8B" },
  "MLP-3": { S: 8192, H: 3584, I: 14336, model: "Gemma-2-9B" },
  "MLP-4": { S: 8192, H: 4608, I: 36864, model: "Gemma-2-27B" },
  "MLP-5": { S: 8192, H: 8192, I: 28672, model: "LLaMA-3.1-70B" },
  "MLP-6": { S: 8192, H: 8192, I: 29568, model: "Qwen-2-72B" },
} as const;

/** A shape's name in the suite. */
export type MlpShapeName = keyof typeof MLP_SHAPES;

/**
 * TileLink's MoE layers (S = tokens, H = hidden, I = intermediate, E experts, top-k), as the
 * bench prediction suite lists them (`packages/bench/src/predict/suites.ts`).
 */
export const MOE_SHAPES = {
  "MoE-1": { S: 8192, H: 2048, I: 1536, E: 8, topk: 2 },
  "MoE-2": { S: 8192, H: 2048, I: 1536, E: 32, topk: 2 },
  "MoE-3": { S: 8192, H: 2048, I: 1536, E: 32, topk: 5 },
  "MoE-4": { S: 8192, H: 4096, I: 2048, E: 8, topk: 2 },
  "MoE-5": { S: 8192, H: 4096, I: 2048, E: 32, topk: 2 },
  "MoE-6": { S: 8192, H: 4096, I: 2048, E: 32, topk: 5 },
} as const;

/** A MoE shape's name in the suite. */
export type MoeShapeName = keyof typeof MOE_SHAPES;
