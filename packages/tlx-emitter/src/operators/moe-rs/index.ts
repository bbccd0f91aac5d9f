// MoE + ReduceScatter's registry entry (TileLink's MoE part 2): the grouped GEMM + scatter body
// writes each expert's weighted rows while every slab's owner pulls and sums them as soon as
// the slab is complete on every rank.
import type { OperatorDefinition } from "../../core/registry.js";
import { anyRowsOptions, moeOptions } from "../gemm-cli.js";
import { compileMoeRsRows } from "./rows-compile.js";
import { compileMoeRs, MOE_RS_DEFAULT_TILE } from "./triton.js";

/** `moe-rs`: `ReduceScatter(topk-sum(scatter(grouped GEMM(X, W))))`. */
export const moeRs: OperatorDefinition = {
  name: "moe-rs",
  summary: "grouped GEMM + scatter + top-k sum + ReduceScatter (MoE part 2), slabs pulled by SM as they complete",
  kind: "moe-rs",
  cli: {
    options: [
      ...moeOptions("--n", "--k"),
      ...anyRowsOptions("all ranks' tokens, reduce-scattered in multiples of the slabs; --tokens is then the count the manifest describes"),
    ],
    shared: ["gemm-sizes", "dtype", "world", "mesh", "template", "side", "split", "backend", "tile", "kernel"],
    templates: ["direct"],
    examples: [
      "ovl emit moe-rs --tokens 8192 --hidden 2048 --intermediate 192 --experts 8 --topk 2 --world 8",
      "ovl emit moe-rs --tokens 8192 --hidden 2048 --intermediate 192 --experts 8 --topk 2 --world 8 --split 1 --any-rows",
    ],
  },
  compute: { tuned: false, defaultTile: () => ({ ...MOE_RS_DEFAULT_TILE }) },
  realise: (op) => compileMoeRs(op),
  realiseRows: (op) => compileMoeRsRows(op, op.rows ?? {}),
};
