// The flags every planning command shares (shape, mesh, template and its knobs) and the
// positive-integer parser whose message says what to type.
import { InvalidArgumentError, type Command } from "commander";
import { TEMPLATES } from "./problem.js";

/** Parser of a positive integer flag, with the hint commander prints on bad input. */
export function positiveInt(flag: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
      throw new InvalidArgumentError(`${flag} needs a positive integer, got '${value}' (for example: ${flag} 4)`);
    }
    return n;
  };
}

/**
 * Add the flags that say which problem to plan: shape and mesh, then (with `knobs`, the
 * default) the template and its knobs, and (with `gemm`) the GEMM's tiling. `ovl tune`
 * takes no knobs: it searches them.
 */
export function problemOptions(cmd: Command, { gemm, knobs = true }: { gemm: boolean; knobs?: boolean }): Command {
  cmd
    .option("--shape <name>", "a TileLink MLP shape: MLP-1 … MLP-6 (default MLP-1)")
    .option("--m <rows>", "explicit shape: rows M of the GEMM (or of the moved tensor)", positiveInt("--m"))
    .option("--n <cols>", "explicit shape: per-rank columns N", positiveInt("--n"))
    .option("--k <depth>", "explicit shape: depth K", positiveInt("--k"))
    .option("--world <ranks>", "ranks of the group (default 8)", positiveInt("--world"))
    .option("--mesh <levels>", "mesh levels outermost first, e.g. 2x4 (instead of --world)");
  if (!knobs) return cmd;
  cmd
    .option("--template <name>", `plan template: ${TEMPLATES.join(", ")} (default per operator)`)
    .option("--side <side>", "push or pull transfers (ring and swizzle; default push)")
    .option("--split <chunks>", "chunks per shard transfer (default 2)", positiveInt("--split"))
    .option(
      "--backend <backend>",
      "transfer backend: copy-engine, sm or nvshmem (default copy-engine; nvshmem: ag-gemm, gemm-rs and the partitioned gemm-ar emit)",
    );
  if (gemm) {
    cmd
      .option("--tile <BMxBNxBK>", "GEMM tile (emit: default the tuned configuration of the shape; plan, simulate: 128x256x64)")
      .option(
        "--group-m <n>",
        "L2 grouping of the tile order (default 8, or the tuned one for emit without --tile)",
        positiveInt("--group-m"),
      )
      .option("--sms <n>", "programs of the persistent GEMM (default 132)", positiveInt("--sms"));
  }
  return cmd;
}
