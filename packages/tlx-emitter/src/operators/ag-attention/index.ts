// Sequence-parallel attention's registry entry: the keys and values gathered by an AllGather
// template (swizzle, ring — Mercury's ring-attention shift — or hierarchical) while the
// flash-attention body computes on the kv blocks already here; for one sequence length or for
// every length of a range (`--any-rows`: S a run-time argument).
import type { OperatorDefinition } from "../../core/registry.js";
import { DEFAULT_TILE } from "../../core/operator.js";
import { anyRowsOptions } from "../gemm-cli.js";
import { compileAgAttentionRows } from "./rows-compile.js";
import { compileAgAttention, defaultAttentionTile } from "./triton.js";

/** `ag-attention`: `O = softmax(Q AllGather(K)ᵀ) AllGather(V)`. */
export const agAttention: OperatorDefinition = {
  name: "ag-attention",
  summary: "sequence-parallel attention: K and V gathered by an AllGather template while flash attention computes",
  kind: "ag-attention",
  cli: {
    options: [
      { name: "seq", type: "positive-int", value: "<S>", help: "global sequence length S (each rank holds S / world positions)" },
      { name: "heads", type: "positive-int", value: "<H>", help: "query heads" },
      { name: "kv-heads", type: "positive-int", value: "<Hkv>", help: "key/value heads (fewer: GQA)", default: "--heads" },
      { name: "head-dim", type: "positive-int", value: "<D>", help: "head dimension (16 ... 256, a power of two)" },
      { name: "causal", type: "switch", help: "the query at position i attends keys at positions <= i" },
      ...anyRowsOptions("the rows are the sequence S, every rank's positions; --seq is then the length the manifest describes"),
    ],
    shared: ["dtype", "world", "mesh", "template", "side", "split", "backend", "tile", "kernel"],
    templates: ["swizzle", "ring", "hierarchical"],
    examples: [
      "ovl emit ag-attention --seq 16384 --heads 32 --head-dim 128 --causal --world 8 --template ring",
      "ovl emit ag-attention --seq 8192 --heads 32 --head-dim 128 --causal --world 8 --any-rows --out attn-any",
    ],
  },
  compute: {
    tuned: false,
    defaultTile: (op) => (op.attention === undefined ? { ...DEFAULT_TILE } : defaultAttentionTile(op.attention)),
  },
  realise: (op) => compileAgAttention(op),
  realiseRows: (op) => compileAgAttentionRows(op, op.rows ?? {}),
};
