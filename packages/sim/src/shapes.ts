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
