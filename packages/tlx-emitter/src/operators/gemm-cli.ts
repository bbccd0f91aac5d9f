// The command-line shape of the fused GEMM operators (AG+GEMM, GEMM+RS, GEMM+AR, A2A+GEMM):
// they share the GEMM problem's options, so their registry entries share this declaration.
import type { OptionDeclaration, SharedOption } from "../core/registry.js";

/** Shared options of every fused GEMM operator: the shape and element type, mesh, template and its knobs, the tiling, the body and plan files. */
export const GEMM_SHARED: readonly SharedOption[] = [
  "shape",
  "gemm-sizes",
  "dtype",
  "world",
  "mesh",
  "template",
  "side",
  "split",
  "backend",
  "tile",
  "group-m",
  "sms",
  "target",
  "kernel",
  "plan",
];

/**
 * The compute knobs beside the tile that a tuned operator's configuration holds (warps, stages,
 * the body variant of its family): the operators whose compute a tuned table decides declare them,
 * so `ovl emit` can compile one exact configuration (what an on-device tuner times).
 */
export const COMPUTE_SHARED: readonly SharedOption[] = ["num-warps", "num-stages", "body"];

/**
 * The ag-moe and moe-rs routing options: tokens, hidden, intermediate, experts, top-k, the
 * experts a checked run draws from; `hidden` and `intermediate` alias the GEMM size flags named.
 */
export function moeOptions(hiddenAlias: "--k" | "--n", intermediateAlias: "--k" | "--n"): readonly OptionDeclaration[] {
  return [
    { name: "tokens", type: "positive-int", value: "<T>", help: "tokens of every rank together (each rank holds its share; --m too)" },
    { name: "hidden", type: "positive-int", value: "<H>", help: `hidden size (${hiddenAlias} too)` },
    { name: "intermediate", type: "positive-int", value: "<I>", help: `this rank's intermediate columns (${intermediateAlias} too)` },
    { name: "experts", type: "positive-int", value: "<E>", help: "number of experts" },
    { name: "topk", type: "positive-int", value: "<k>", help: "experts per token (at most --experts)" },
    {
      name: "choices",
      type: "string",
      value: "<ids>",
      help: "the experts a checked run's random routing draws from, e.g. 0,2,3 (default all)",
    },
  ];
}

/**
 * `--any-rows` and its range (`--min-rows`, `--max-rows`) for an operator with an any-row-count form; `what` ends the
 * switch's help: how that operator moves its rows, and what `--m` then means.
 */
export function anyRowsOptions(what: string): readonly OptionDeclaration[] {
  return [
    {
      name: "any-rows",
      type: "switch",
      help: `one operator for every row count M from --min-rows to --max-rows (M a run-time argument; ${what})`,
    },
    {
      name: "min-rows",
      type: "positive-int",
      value: "<M>",
      help: "with --any-rows: the fewest rows served (default: what whole m-block chunks need)",
    },
    { name: "max-rows", type: "positive-int", value: "<M>", help: "with --any-rows: the most rows served", default: 32768 },
  ];
}
