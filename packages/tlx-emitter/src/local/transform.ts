// The transformation (TileLink §4): a consumer remaps its row block and waits on its slots right
// after the statement that sets it; a producer remaps its tile and notifies after the tile's stores.
// Every edit is an insertion at a position of the syntax tree, so the user's text is kept byte for byte.
import { pyLiteral, sanitizeText } from "../core/writer/literals.js";
import { LocalKernelError } from "./errors.js";
import { gatherConsumerLines, scatterProducerLines } from "./gather-rows.js";
import { groupedKvEdits, type KvGroups } from "./kv-block.js";
import type { LocalKernel } from "./parse.js";
import { lineOf, named, type SyntaxNode } from "./parser.js";
import { DOMAIN_VARIABLE, checkProgram, printMap, runtimeParams, type TileProgram } from "./program.js";

/** The emitted kernel module and its signature. */
export interface LocalKernelOutput {
  /** The Python module text. */
  source: string;
  /** The kernel's name. */
  entry: string;
  /** Every parameter of the emitted kernel, in order (the user's, then the inserted ones). */
  params: string[];
  /** The user's `tl.constexpr` parameters. */
  constexprs: string[];
  /** The parameters the transformation appended, in order. */
  insertedParams: string[];
}

/** Options of {@link transformLocalKernel}. */
export interface TransformOptions {
  /** Source file named in the emitted docstring (default: the parsed kernel's file). */
  file?: string;
  /** A kv-loop consumer's arrival groups: its waits move out of the kv loops, once per group. */
  kvGroups?: KvGroups;
}

interface Insertion {
  at: number;
  /** When given, `text` replaces `[at, to)`. */
  to?: number;
  text: string;
}

/**
 * The overlapped kernel module: `kernel` with `program`'s order, waits (consumer) or notifies
 * (producer) inserted. Throws {@link LocalKernelError} (`bad-program`, `bad-identifier`,
 * `name-collision`) before emitting anything when the program does not fit the kernel.
 */
export function transformLocalKernel(kernel: LocalKernel, program: TileProgram, options: TransformOptions = {}): LocalKernelOutput {
  const { file, source, shape, parts } = kernel;
  checkProgram(program, kernel.role, kernel.identifiers, file);
  const eol = source.includes("\r\n") ? "\r\n" : "\n";
  const untouched = kernel.warpSpecialized && checkWarpSpecialized(kernel, program);
  const inserted = untouched ? [] : [...program.tables, ...(program.scalars ?? []), ...runtimeParams(program)];
  const edits: Insertion[] = untouched ? [] : [signatureEdit(shape.func, inserted)];
  if (kernel.waitsPer === "kv-block") edits.push(...kvEdits(kernel, program, eol, options.kvGroups));
  const lines: Lines = untouched
    ? { after: [], atEnd: [] }
    : kernel.role === "consumer"
      ? consumerLines(kernel, program)
      : producerLines(kernel, program);
  lines.after.forEach((block, i) => {
    const stmt = shape.tileStatements[i]?.node as SyntaxNode;
    edits.push(insertAfterLine(source, stmt, stmt, block, eol));
  });
  if (lines.beforeLoop !== undefined && shape.tileLoop !== undefined)
    edits.push(insertBeforeLine(source, shape.tileLoop, lines.beforeLoop, eol));
  for (const { node, lines: block } of lines.beforeStatement ?? []) edits.push(insertBeforeLine(source, node, block, eol));
  if (lines.atEnd.length > 0) {
    const statements = named(shape.tileBlock).filter((s) => s.type !== "comment");
    const first = statements[0] as SyntaxNode;
    const last = statements[statements.length - 1] as SyntaxNode;
    edits.push(insertAfterLine(source, last, first, lines.atEnd, eol));
  }
  // After the tile's own end lines: both may insert at the loop's last line (a stable sort keeps this order).
  if (lines.afterLoop !== undefined && shape.tileLoop !== undefined)
    edits.push(insertAfterLine(source, shape.tileLoop, shape.tileLoop, lines.afterLoop, eol));

  const primitives = untouched
    ? []
    : kernel.role === "consumer"
      ? program.slots.length > 0
        ? ["load_epoch_target", "wait_slot", "consume_token", ...(program.gather?.segmentCount === undefined ? [] : ["ld_acquire_sys"])]
        : []
      : program.slots.length > 0
        ? [program.owners === undefined ? (lines.primitive ?? notifyPrimitive(program)) : "peer_notify_many"]
        : [];
  const from = options.file ?? file;
  const head = [
    `"""${sanitizeText(`${kernel.entry}: ${kernel.role} kernel with ovl's tile-boundary ${kernel.role === "consumer" ? "waits" : "notifies"}.`)}`,
    "",
    `${sanitizeText(`Emitted by @ovl/tlx-emitter from ${from} (${kernel.entry}); edit the source kernel, not this file.`)}"""`,
    ...parts.imports.map((i) => i.text),
    ...(primitives.length > 0 ? [`from ovl_runtime.language import ${primitives.join(", ")}`] : []),
  ];
  const functions = parts.functions.map((def) =>
    def.id === shape.definition.id ? splice(source, def.startIndex, def.endIndex, edits) : def.text,
  );
  const text = [head.join(eol), ...functions].join(eol + eol + eol) + eol;
  return {
    source: text,
    entry: kernel.entry,
    params: [...kernel.params.map((p) => p.name), ...inserted],
    constexprs: kernel.params.filter((p) => p.constexpr).map((p) => p.name),
    insertedParams: inserted,
  };
}

/**
 * A warp-specialised tile loop (`tl.range(..., warp_specialize=True)`) takes no inserted code:
 * Triton 3.6's Hopper warp specialisation drops a tile loop's atomics or repeats them in each
 * consumer partition (over its half of the rows), hoists atomics written after the loop above
 * it, and fails on loop-carried values. So only a producer whose program notifies nothing per
 * tile (its operator signals once per launch, after the kernel) and visits the tiles in their
 * own order is accepted; the kernel is then emitted as written.
 * @throws {LocalKernelError} `unsafe-tile-loop` for anything else.
 */
function checkWarpSpecialized(kernel: LocalKernel, program: TileProgram): true {
  const refuse = (why: string): LocalKernelError =>
    new LocalKernelError(
      "unsafe-tile-loop",
      kernel.file,
      lineOf(kernel.shape.tileLoop as SyntaxNode),
      `${kernel.entry}'s tile loop is warp-specialised (warp_specialize=True), ${why}: Triton's warp specialisation drops, repeats or hoists the atomics ovl would insert into it; ` +
        "remove warp_specialize=True, or compile it as an operator that signals once per launch (moe-rs)",
    );
  if (kernel.role === "consumer") throw refuse("and a consumer waits inside its tile loop");
  if (program.slots.length > 0) throw refuse("and this operator notifies per tile");
  const v = DOMAIN_VARIABLE.producer;
  if (printMap(program.order, v, v, kernel.file) !== v) throw refuse("and this operator reorders the tiles");
  return true;
}

/** Append the new parameters after the last existing one (a trailing comma stays valid). */
function signatureEdit(func: SyntaxNode, names: readonly string[]): Insertion {
  const params = func.childForFieldName("parameters") as SyntaxNode;
  const last = named(params)
    .filter((p) => p.type !== "comment")
    .pop();
  return last === undefined ? { at: params.startIndex + 1, text: names.join(", ") } : { at: last.endIndex, text: `, ${names.join(", ")}` };
}

/**
 * Lines inserted after the last line of `after` (past any trailing comment), indented like
 * `like`; a nested line starts with a tab-or-4-spaces unit (`\t` prefix in `block`).
 */
function insertAfterLine(source: string, after: SyntaxNode, like: SyntaxNode, block: readonly string[], eol: string): Insertion {
  const lineStart = source.lastIndexOf("\n", like.startIndex - 1) + 1;
  const indent = source.slice(lineStart, like.startIndex);
  const unit = indent.includes("\t") ? "\t" : "    ";
  let at = source.indexOf("\n", after.endIndex);
  if (at < 0) at = source.length;
  else if (source[at - 1] === "\r") at -= 1;
  const text = block.map((l) => eol + indent + l.replace(/^\t+/, (tabs) => unit.repeat(tabs.length))).join("");
  return { at, text };
}

/** `source[start, end)` with the insertions that fall inside it applied. */
function splice(source: string, start: number, end: number, edits: readonly Insertion[]): string {
  const inside = edits.filter((e) => e.at >= start && e.at <= end).sort((a, b) => a.at - b.at);
  let out = "";
  let pos = start;
  for (const e of inside) {
    out += source.slice(pos, e.at) + e.text;
    pos = e.to ?? e.at;
  }
  return out + source.slice(pos, end);
}

interface Lines {
  /** Per tile statement (in order), the lines inserted after it. */
  after: string[][];
  /** Lines inserted at the end of the tile. */
  atEnd: string[];
  /** Lines inserted before a persistent kernel's tile loop. */
  beforeLoop?: string[];
  /** Lines inserted after a persistent kernel's tile loop, indented like it. */
  afterLoop?: string[];
  /** Lines inserted before statements of the tile, each block indented like its statement. */
  beforeStatement?: { node: SyntaxNode; lines: string[] }[];
  /** The notify primitive the lines call, where not the program's own (`notifyPrimitive(program)`). */
  primitive?: NotifyPrimitive;
}

/** Remap the row block through the order, then wait on its slots (first tile statement only). */
function consumerLines(kernel: LocalKernel, program: TileProgram): Lines {
  if (program.gather !== undefined) return { after: gatherConsumerLines(kernel, program, program.gather), atEnd: [] };
  if (kernel.rows !== undefined) {
    throw new LocalKernelError(
      "bad-program",
      kernel.file,
      0,
      `${kernel.entry} reads its rows through the index table ${kernel.rows} (rows=), but the tile program waits per m-block; compile it as an operator that gathers rows (ag-moe)`,
    );
  }
  const v = DOMAIN_VARIABLE.consumer;
  // A persistent kernel reads this launch's wait target (the rank's epoch word on the device, one
  // arrival per slot) once, before its tile loop, and remembers the slots 0..31 it has seen reach
  // it (`ovl_waited`): a slot once reached stays reached within the launch, so a later tile of the
  // same chunk issues no acquire load; its loads follow the earlier acquire in program order.
  const persistent = kernel.shape.tileLoop !== undefined && kernel.shape.tileStatements.length > 0 && program.slots.length > 0;
  const after = kernel.shape.tileStatements.map((t, i) => {
    const m = t.m;
    const lines = [`${v} = ${m}`, `${m} = ${printMap(program.order, v, v, kernel.file)}`];
    if (i > 0 || program.slots.length === 0) return lines;
    // Slot maps are over the m-block to compute, i.e. the remapped row block.
    lines.push(`ovl_mb = ${m}`);
    if (!persistent) lines.push("ovl_target = load_epoch_target(ovl_epoch_ptr, 1)");
    program.slots.forEach((slot, j) => {
      lines.push(`ovl_slot${j} = ${printMap(slot, v, "ovl_mb", kernel.file)}`);
      if (persistent) {
        lines.push(
          `ovl_bit${j} = tl.where(ovl_slot${j} < 32, tl.full([], 1, tl.int32) << (ovl_slot${j} & 31), 0)`,
          `if (ovl_slot${j} >= 0) & ((ovl_waited & ovl_bit${j}) == 0):`,
        );
      } else lines.push(`if ovl_slot${j} >= 0:`);
      lines.push(
        `\tovl_tok = wait_slot(ovl_sig_ptr, ovl_slot${j}, ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)`,
        // Every address computed from the row block now depends on the wait (TileLink §4.2).
        `\t${m} = consume_token(${m}, ovl_tok)`,
        ...(persistent ? [`\tovl_waited = ovl_waited | ovl_bit${j}`] : []),
      );
    });
    return lines;
  });
  return {
    after,
    atEnd: [],
    ...(persistent ? { beforeLoop: ["ovl_target = load_epoch_target(ovl_epoch_ptr, 1)", "ovl_waited = 0"] } : {}),
  };
}

/**
 * A kv loop's insertions: the launch's wait target before the loop, the remap of the block
 * through the order after its statement, and the waits on the block's slot columns there or
 * at the top of the `if` that guards the rest of the iteration; with `groups`, a loop in the
 * grouped form waits once per arrival group before it instead ({@link groupedKvEdits}).
 */
function kvEdits(kernel: LocalKernel, program: TileProgram, eol: string, groups?: KvGroups): Insertion[] {
  const v = DOMAIN_VARIABLE.consumer;
  const { source } = kernel;
  return kernel.shape.kvStatements.flatMap((s) => {
    const kv = s.kv;
    const remap = [`${v} = ${kv}`, `${kv} = ${printMap(program.order, v, v, kernel.file)}`];
    if (program.slots.length === 0) return [insertAfterLine(source, s.node, s.node, remap, eol)];
    const grouped = groups === undefined ? undefined : groupedKvEdits(source, s, groups, remap, eol);
    if (grouped !== undefined) return grouped;
    const waits = [`ovl_mb = ${kv}`];
    program.slots.forEach((slot, j) => {
      waits.push(
        `ovl_slot${j} = ${printMap(slot, v, "ovl_mb", kernel.file)}`,
        `if ovl_slot${j} >= 0:`,
        `\tovl_tok = wait_slot(ovl_sig_ptr, ovl_slot${j}, ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)`,
        `\t${kv} = consume_token(${kv}, ovl_tok)`,
      );
    });
    const target = insertBeforeLine(source, s.loop, ["ovl_target = load_epoch_target(ovl_epoch_ptr, 1)"], eol);
    if (s.guard === undefined) return [target, insertAfterLine(source, s.node, s.node, [...remap, ...waits], eol)];
    const first = named(s.guard).find((x) => x.type !== "comment") as SyntaxNode;
    return [target, insertAfterLine(source, s.node, s.node, remap, eol), insertBeforeLine(source, first, waits, eol)];
  });
}

/** Lines inserted in front of the line `node` starts (it starts its line), indented like it. */
function insertBeforeLine(source: string, node: SyntaxNode, block: readonly string[], eol: string): Insertion {
  const lineStart = source.lastIndexOf("\n", node.startIndex - 1) + 1;
  const indent = source.slice(lineStart, node.startIndex);
  const unit = indent.includes("\t") ? "\t" : "    ";
  const text = block.map((l) => indent + (l.startsWith("\t") ? unit + l.slice(1) : l) + eol).join("");
  return { at: lineStart, text };
}

/** Remap the linear tile through the order; after the tile's stores, notify its slots. */
function producerLines(kernel: LocalKernel, program: TileProgram): Lines {
  const v = DOMAIN_VARIABLE.producer;
  const n = pyLiteral(program.numPidN as number);
  const after = kernel.shape.tileStatements.map((t) => [
    `${v} = ${t.m} * ${n} + ${t.n as string}`,
    `ovl_t2 = ${printMap(program.order, v, v, kernel.file)}`,
    `${t.m} = ovl_t2 // ${n}`,
    `${t.n as string} = ovl_t2 % ${n}`,
  ]);
  const notify = notifyPrimitive(program);
  if (program.gather !== undefined) {
    return { after, atEnd: program.slots.length > 0 ? scatterProducerLines(kernel, program, program.gather, notify) : [] };
  }
  if (kernel.rows !== undefined) {
    throw new LocalKernelError(
      "bad-program",
      kernel.file,
      0,
      `${kernel.entry} writes its rows through the index table ${kernel.rows} (rows=), but the tile program notifies per tile; compile it as an operator that scatters rows (moe-rs)`,
    );
  }
  // A masked notify, not a branch around it: Triton 3.6 flattens and pipelines a tile loop whose
  // epilogue holds the call, where an `if` there fails to flatten (TritonGPUFuseNestedLoops).
  const slotLines = program.slots.map((slot, j) => `ovl_slot${j} = ${printMap(slot, v, "ovl_t2", kernel.file)}`);
  const kLoop = program.notifyAt === "next-tile" ? kLoopOf(kernel) : undefined;
  const kBody = kLoop === undefined ? undefined : firstStatement(kLoop);
  if (kLoop === undefined || kBody === undefined) {
    return { after, atEnd: slotLines.flatMap((line, j) => [line, `${notify}(ovl_sig_ptr, ovl_slot${j}, ovl_slot${j} >= 0)`]) };
  }
  // notifyAt "next-tile": the tile's slots are known before its K loop. The pending notify of the program's previous
  // tile (ovl_prev, ovl_cnt tiles) is issued at the top of K step 1, its stores written by then, through the
  // predicated notify (a compare at every other step, so the K loop stays pipelined) — unless this tile notifies
  // the same slot: this tile ends later, so the slot completes when it would have, and the count is carried on as one
  // add. After the stores whatever is still pending on another slot (a one-step K loop) is issued, and the last run
  // after the tile loop. Every exit from a tile is refused (checkExits), so each tile is counted once.
  const notifyIf = notifyPrimitive(program, true);
  const due = program.slots.flatMap((_, j) => [
    `ovl_due${j} = (ovl_k == 1) & (ovl_prev${j} >= 0) & (ovl_prev${j} != ovl_slot${j})`,
    `${notifyIf}(ovl_sig_ptr, ovl_prev${j}, ovl_due${j}, ovl_cnt${j})`,
    `ovl_prev${j} = tl.where(ovl_due${j}, -1, ovl_prev${j})`,
    `ovl_cnt${j} = tl.where(ovl_due${j}, 0, ovl_cnt${j})`,
  ]);
  const end = program.slots.flatMap((_, j) => [
    `ovl_flush${j} = (ovl_prev${j} >= 0) & (ovl_prev${j} != ovl_slot${j})`,
    `${notifyIf}(ovl_sig_ptr, ovl_prev${j}, ovl_flush${j}, ovl_cnt${j})`,
    `ovl_cnt${j} = tl.where(ovl_slot${j} >= 0, tl.where(ovl_prev${j} == ovl_slot${j}, ovl_cnt${j}, 0) + 1, 0)`,
    `ovl_prev${j} = ovl_slot${j}`,
  ]);
  return {
    after,
    atEnd: end,
    beforeLoop: program.slots.flatMap((_, j) => [`ovl_prev${j} = -1`, `ovl_cnt${j} = 0`]),
    beforeStatement: [
      { node: kLoop, lines: [...slotLines, "ovl_k = 0"] },
      { node: kBody, lines: [...due, "ovl_k += 1"] },
    ],
    afterLoop: program.slots.map((_, j) => `${notifyIf}(ovl_sig_ptr, ovl_prev${j}, ovl_prev${j} >= 0, ovl_cnt${j})`),
    primitive: notifyIf,
  };
}

/** The first statement (not a comment) of a loop's body, or undefined. */
function firstStatement(loop: SyntaxNode): SyntaxNode | undefined {
  const body = loop.childForFieldName("body");
  return body === null ? undefined : named(body).find((s) => s.type !== "comment");
}

/**
 * The loop a persistent producer's tile runs after its tile statements (its K loop): the first
 * `for` or `while` at the tile's top level past the last tile statement, or undefined (no tile
 * loop, or nothing to hide a notify's wait behind).
 */
function kLoopOf(kernel: LocalKernel): SyntaxNode | undefined {
  const { tileLoop, tileBlock, tileStatements } = kernel.shape;
  if (tileLoop === undefined) return undefined;
  const last = tileStatements[tileStatements.length - 1]?.node as SyntaxNode | undefined;
  return named(tileBlock).find(
    (s) => (s.type === "for_statement" || s.type === "while_statement") && (last === undefined || s.startIndex >= last.endIndex),
  );
}

/** A device primitive a producer's notifies call (`ovl_runtime.language`). */
type NotifyPrimitive = "notify_slot" | "notify_slot_gpu" | "notify_slot_if" | "notify_slot_gpu_if";

/**
 * The device primitive a producer's notifies call: system scope, or gpu scope where the program asks (`notifyScope`);
 * `predicated`: its form that does nothing where its condition is false (`_if`, a K loop may hold it).
 */
function notifyPrimitive(program: TileProgram, predicated = false): NotifyPrimitive {
  const scoped = program.notifyScope === "gpu" ? "notify_slot_gpu" : "notify_slot";
  return predicated ? `${scoped}_if` : scoped;
}
