// The workload suites the predictions cover (TileLink Table 4 and its MoE / attention
// tables): MLP-1…6 for the GEMM operators, MoE-1…6 for AG + Gather + GroupGEMM, Attn-1/2
// at 16k–128k for sequence-parallel attention.
import { MLP_SHAPES, type MlpShapeName } from "../../src/index.js";

/** TileLink's MoE layers: S tokens of all ranks, hidden H, intermediate I (split over ranks), E experts, top-k. */
export const MOE_SHAPES = {
  "MoE-1": { S: 8192, H: 2048, I: 1536, E: 8, topk: 2 },
  "MoE-2": { S: 8192, H: 2048, I: 1536, E: 32, topk: 2 },
  "MoE-3": { S: 8192, H: 2048, I: 1536, E: 32, topk: 5 },
  "MoE-4": { S: 8192, H: 4096, I: 2048, E: 8, topk: 2 },
  "MoE-5": { S: 8192, H: 4096, I: 2048, E: 32, topk: 2 },
  "MoE-6": { S: 8192, H: 4096, I: 2048, E: 32, topk: 5 },
} as const;

/** TileLink's attention layers (MHA, head dim 128), each at sequence 16k, 32k, 64k and 128k. */
export const ATTENTION_SHAPES = {
  "Attn-1": { heads: 32, headDim: 128 },
  "Attn-2": { heads: 64, headDim: 128 },
} as const;

/** Sequence lengths of the attention suite. */
export const ATTENTION_SEQS = [16384, 32768, 65536, 131072] as const;

/** World sizes predicted. */
export const PREDICTION_WORLDS = [2, 4, 8] as const;

/** Hardware models predicted. */
export const PREDICTION_HARDWARE = ["H100_SXM", "H200_SXM"] as const;

/** The MLP shape names in suite order. */
export const MLP_NAMES = Object.keys(MLP_SHAPES) as MlpShapeName[];
