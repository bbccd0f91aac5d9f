// The waits of a consumer that gathers its rows through an index table (`# ovl: consumer
// gather=<p> rows=<table>`, a MoE body): which rows a block reads is known only on the
// device (TileLink §4.1's dynamic shape map), so the inserted code reads the block's table
// entries, takes the first and last row they name, and waits on every segment of rows
// between them. Segments are nondecreasing in the row, so that range covers every row read.
import { pyLiteral } from "../writer/literals.js";
import { LocalKernelError } from "./errors.js";
import type { LocalKernel } from "./parse.js";
import { DOMAIN_VARIABLE, GATHER_VARIABLES, printMap, type GatherRows, type TileProgram } from "./program.js";

/**
 * The lines after a gathering consumer's first tile statement: the remap through the order,
 * then the block's row range from its table entries and the waits on every segment in it.
 * @throws {LocalKernelError} `bad-program` when the kernel and the program disagree on
 *   whether rows are gathered through a table.
 */
export function gatherConsumerLines(kernel: LocalKernel, program: TileProgram, gather: GatherRows): string[][] {
  const rows = kernel.rows;
  if (rows === undefined) {
    throw new LocalKernelError(
      "bad-program",
      kernel.file,
      0,
      `the tile program gathers rows through an index table, but ${kernel.entry} names none: annotate it "# ovl: consumer gather=${kernel.operand} rows=<index table parameter>"`,
    );
  }
  const v = DOMAIN_VARIABLE.consumer;
  const { row, segment } = GATHER_VARIABLES;
  const bm = pyLiteral(gather.blockRows);
  const div = pyLiteral(gather.divisor);
  const limit = pyLiteral(gather.limit);
  const last = pyLiteral(gather.rowCount - 1);
  const seg = (over: string) => printMap(gather.segment, row, over, kernel.file);
  return kernel.shape.tileStatements.map((t, i) => {
    const m = t.m;
    const lines = [`${v} = ${m}`, `${m} = ${printMap(program.order, v, v, kernel.file)}`];
    if (i > 0 || program.slots.length === 0) return lines;
    lines.push(
      `ovl_mb = ${m}`,
      "ovl_target = load_epoch_target(ovl_epoch_ptr, 1)",
      // The block's entries; padding (>= limit) names no row.
      `ovl_ids = tl.load(${rows} + ovl_mb * ${bm} + tl.arange(0, ${bm}))`,
      `ovl_lo = tl.minimum(tl.min(ovl_ids, axis=0) // ${div}, ${last})`,
      `ovl_hi = tl.max(tl.where(ovl_ids < ${limit}, ovl_ids, 0), axis=0) // ${div}`,
      `ovl_end = tl.where(tl.min(ovl_ids, axis=0) < ${limit}, ${seg("ovl_hi")} + 1, 0)`,
      `for ovl_seg in range(${seg("ovl_lo")}, ovl_end):`,
    );
    program.slots.forEach((slot, j) => {
      lines.push(
        `\tovl_slot${j} = ${printMap(slot, segment, segment, kernel.file)}`,
        `\tif ovl_slot${j} >= 0:`,
        `\t\tovl_tok = wait_slot(ovl_sig_ptr, ovl_slot${j}, ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)`,
        // Every address computed from the block now depends on the wait (TileLink §4.2).
        `\t\t${m} = consume_token(${m}, ovl_tok)`,
      );
    });
    return lines;
  });
}
