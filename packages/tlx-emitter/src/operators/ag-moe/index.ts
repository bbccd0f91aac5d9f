// AllGather + MoE's registry entry (TileLink's MoE part 1): the tokens gathered while the
// routing is computed on the device and the gather + grouped GEMM body computes each expert's rows.
import type { OperatorDefinition } from "../../core/registry.js";
import { anyRowsOptions, GEMM_SHARED, moeOptions } from "../gemm-cli.js";
import { compileAgMoeRows } from "./rows-compile.js";
import { compileAgMoe, MOE_DEFAULT_TILE } from "./triton.js";

/** `ag-moe`: `C = grouped GEMM(gather(AllGather(X), topk_ids), W)`. */
export const agMoe: OperatorDefinition = {
  name: "ag-moe",
  summary: "AllGather + gather + grouped GEMM (MoE part 1), the routing computed on the device",
  kind: "ag-moe",
  cli: {
    options: [
      ...moeOptions("--k", "--n"),
      ...anyRowsOptions("all ranks' tokens, gathered and routed; --tokens is then the count the manifest describes"),
    ],
    // --m/--n/--k alias --tokens/--intermediate/--hidden; the shape is the MoE's own, not an MLP shape.
    shared: GEMM_SHARED.filter((s) => s !== "shape" && s !== "plan" && s !== "group-m" && s !== "sms"),
    templates: ["swizzle", "ring", "hierarchical"],
    examples: [
      "ovl emit ag-moe --tokens 8192 --hidden 2048 --intermediate 1536 --experts 8 --topk 2 --world 8",
      "ovl emit ag-moe --tokens 1024 --hidden 512 --intermediate 256 --experts 4 --topk 2 --world 2 --tile 128x128x64",
      "ovl emit ag-moe --tokens 8192 --hidden 2048 --intermediate 1536 --experts 8 --topk 2 --world 8 --any-rows --out ag-moe-any",
    ],
  },
  compute: {
    tuned: true,
    bodies: ["moe_gather_gemm_blocks", "moe_gather_gemm"],
    defaultTile: () => ({ ...MOE_DEFAULT_TILE }),
  },
  realise: (op) => compileAgMoe(op),
  realiseRows: (op) => compileAgMoeRows(op, op.rows ?? {}),
};
