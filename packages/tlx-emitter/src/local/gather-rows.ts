// The waits or notifies of a body that touches its rows through an index table (`# ovl:
// consumer gather=<p> rows=<table>` / `# ovl: producer scatter=<p> rows=<table>`, MoE
// bodies): which rows a block reads or writes is known only on the device (TileLink §4.1's
// dynamic shape map), so the inserted code reads the block's table entries, takes the first
// and last row they name, and waits on (or notifies) every segment of rows between them.
// Segments are nondecreasing in the row, so that range covers every row touched.
import type { Expr } from "@ovl/mapping";
import { pyLiteral } from "../core/writer/literals.js";
import { LocalKernelError } from "./errors.js";
import type { LocalKernel } from "./parse.js";
import { DOMAIN_VARIABLE, GATHER_VARIABLES, PEER_SIGNALS_PARAM, printMap, type GatherRows, type TileProgram } from "./program.js";

/** `e` (over the program's scalars) as Triton prints it, in parentheses. */
function printExpr(e: Expr, file: string): string {
  return `(${printMap({ kind: "static", expr: e }, "", "", file)})`;
}

/** The table parameter of a kernel a gathering program needs. */
function rowsTable(kernel: LocalKernel): string {
  if (kernel.rows !== undefined) return kernel.rows;
  const [key, role] = kernel.role === "consumer" ? ["gather", "consumer"] : ["scatter", "producer"];
  throw new LocalKernelError(
    "bad-program",
    kernel.file,
    0,
    `the tile program ${kernel.role === "consumer" ? "gathers" : "scatters"} rows through an index table, but ${kernel.entry} names none: annotate it "# ovl: ${role} ${key}=${kernel.operand} rows=<index table parameter>"`,
  );
}

/**
 * The lines that read block `block`'s table entries and set `ovl_end` (one past its last
 * segment; 0 for a block of padding only), and the expression of its first segment: the
 * segments `first .. ovl_end - 1` are the ones its rows touch.
 */
function blockSegments(kernel: LocalKernel, gather: GatherRows, block: string): { lines: string[]; first: string } {
  const rows = rowsTable(kernel);
  const bm = pyLiteral(gather.blockRows);
  const div = pyLiteral(gather.divisor);
  const limit = gather.runtime === undefined ? pyLiteral(gather.limit) : printExpr(gather.runtime.limit, kernel.file);
  const last = gather.runtime === undefined ? pyLiteral(gather.rowCount - 1) : printExpr(gather.runtime.last, kernel.file);
  const seg = (over: string) => printMap(gather.segment, GATHER_VARIABLES.row, over, kernel.file);
  const lines = [
    // The block's entries; padding (>= limit) names no row.
    `ovl_ids = tl.load(${rows} + ${block} * ${bm} + tl.arange(0, ${bm}))`,
    `ovl_lo = tl.minimum(tl.min(ovl_ids, axis=0) // ${div}, ${last})`,
    `ovl_hi = tl.max(tl.where(ovl_ids < ${limit}, ovl_ids, 0), axis=0) // ${div}`,
    `ovl_end = tl.where(tl.min(ovl_ids, axis=0) < ${limit}, ${seg("ovl_hi")} + 1, 0)`,
  ];
  return { lines, first: seg("ovl_lo") };
}

/** `blockSegments`' lines and the loop over the block's segments (the body to follow one tab deeper). */
function segmentLoop(kernel: LocalKernel, gather: GatherRows, block: string): string[] {
  const { lines, first } = blockSegments(kernel, gather, block);
  return [...lines, `for ovl_seg in range(${first}, ovl_end):`];
}

/**
 * The lines after a gathering consumer's first tile statement: the remap through the order,
 * then the block's row range from its table entries and the waits on every segment in it.
 * With `gather.segmentCount`, the block's segments are first read as one vector (that many
 * rounded up to a power of two, clamped to the last segment, masked past the block's last):
 * one acquire load per segment and slot column, all in flight at once, and one reduction
 * whose result is the token; the loop of bounded waits runs only when a slot is still short.
 * Without it, the loop alone: each segment's table entry and slot read one after the other.
 * @throws {LocalKernelError} `bad-program` when the kernel names no index table.
 */
export function gatherConsumerLines(kernel: LocalKernel, program: TileProgram, gather: GatherRows): string[][] {
  const v = DOMAIN_VARIABLE.consumer;
  const { segment } = GATHER_VARIABLES;
  rowsTable(kernel);
  return kernel.shape.tileStatements.map((t, i) => {
    const m = t.m;
    const lines = [`${v} = ${m}`, `${m} = ${printMap(program.order, v, v, kernel.file)}`];
    if (i > 0 || program.slots.length === 0) return lines;
    lines.push(`ovl_mb = ${m}`, "ovl_target = load_epoch_target(ovl_epoch_ptr, 1)");
    const { lines: range, first } = blockSegments(kernel, gather, "ovl_mb");
    lines.push(...range);
    const loop = [`for ovl_seg in range(${first}, ovl_end):`];
    program.slots.forEach((slot, j) => {
      loop.push(
        `\tovl_slot${j} = ${printMap(slot, segment, segment, kernel.file)}`,
        `\tif ovl_slot${j} >= 0:`,
        `\t\tovl_tok = wait_slot(ovl_sig_ptr, ovl_slot${j}, ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)`,
        // Every address computed from the block now depends on the wait (TileLink §4.2).
        `\t\t${m} = consume_token(${m}, ovl_tok)`,
      );
    });
    if (gather.segmentCount === undefined) return [...lines, ...loop];
    const count = gather.segmentCount;
    const width = 2 ** Math.ceil(Math.log2(Math.max(2, count)));
    lines.push(`ovl_in = ${first} + tl.arange(0, ${pyLiteral(width)})`, `ovl_vseg = tl.minimum(ovl_in, ${pyLiteral(count - 1)})`);
    program.slots.forEach((slot, j) => {
      const shortfall = `tl.where((ovl_in < ovl_end) & (ovl_vslot${j} >= 0), ld_acquire_sys(ovl_sig_ptr + tl.maximum(ovl_vslot${j}, 0)) - ovl_target, 0)`;
      lines.push(
        `ovl_vslot${j} = ${printMap(slot, segment, VECTOR_SEGMENT, kernel.file)}`,
        // How far each slot of the block still is from the target (wrap-aware, as wait_slot compares); 0 outside it.
        j === 0 ? `ovl_seen = ${shortfall}` : `ovl_seen = tl.minimum(ovl_seen, ${shortfall})`,
      );
    });
    lines.push(
      "ovl_short = tl.min(ovl_seen, axis=0)",
      "if ovl_short < 0:",
      ...loop.map((l) => `\t${l}`),
      `${m} = consume_token(${m}, ovl_short)`,
    );
    return lines;
  });
}

/** The vector of a block's segments a consumer with `segmentCount` reads its slots over. */
const VECTOR_SEGMENT = "ovl_vseg";

/**
 * The lines at the end of a scattering producer's tile (after its stores): the block of the
 * remapped tile (`ovl_t2 // numPidN`), its row range from the table entries, and one notify
 * per slot column of every segment in it. With `owners`, the segments are one vector
 * (`segmentCount` rounded up to a power of two, clamped to the last segment, masked past the
 * block's last) notified on their owners through the signal peer table by one
 * `peer_notify_many` per column (one barrier, the release adds in parallel); without, a loop
 * of `notify` on this rank.
 * @throws {LocalKernelError} `bad-program` when the kernel names no index table.
 */
export function scatterProducerLines(kernel: LocalKernel, program: TileProgram, gather: GatherRows, notify: string): string[] {
  const { segment } = GATHER_VARIABLES;
  const block = `(ovl_t2 // ${pyLiteral(program.numPidN as number)})`;
  if (program.owners === undefined) {
    const loop = segmentLoop(kernel, gather, block);
    program.slots.forEach((slot, j) => {
      loop.push(
        `\tovl_slot${j} = ${printMap(slot, segment, segment, kernel.file)}`,
        `\t${notify}(ovl_sig_ptr, ovl_slot${j}, ovl_slot${j} >= 0)`,
      );
    });
    return loop;
  }
  const count = gather.segmentCount as number;
  const width = 2 ** Math.ceil(Math.log2(Math.max(2, count)));
  const { lines, first } = blockSegments(kernel, gather, block);
  const owner = printMap(program.owners, segment, segment, kernel.file);
  // The block's segments as one vector, clamped to the last segment and masked past ovl_end.
  lines.push(`ovl_in = ${first} + tl.arange(0, ${pyLiteral(width)})`, `ovl_seg = tl.minimum(ovl_in, ${pyLiteral(count - 1)})`);
  program.slots.forEach((slot, j) => {
    lines.push(
      `ovl_slot${j} = ${printMap(slot, segment, segment, kernel.file)}`,
      `peer_notify_many(${PEER_SIGNALS_PARAM}, ${owner}, ovl_slot${j}, (ovl_in < ovl_end) & (ovl_slot${j} >= 0))`,
    );
  });
  return lines;
}
