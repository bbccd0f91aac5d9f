// The tile program applied to a local kernel: the visit order and the wait/notify slots as
// TileLink index maps. Everything in it is checked before any text is emitted, since its
// names become parameters and its maps become code.
import { IndexMapSchema, MappingError, freeVariables, isValidIdentifier, mapToPython, type Expr, type IndexMap } from "@ovl/mapping";
import { isSafeIdentifier } from "../core/writer/identifiers.js";
import { LocalKernelError } from "./errors.js";

/** What to insert into a local kernel: visit order, wait or notify slots, and their tables. */
export interface TileProgram {
  role: "consumer" | "producer";
  /**
   * Index map over the variable "ovl_m" (consumer: the kernel's m-block visit index → m-block to
   * compute) or "ovl_t" (producer: the kernel's linear tile index m*numPidN+n → tile to compute).
   */
  order: IndexMap;
  /**
   * Consumer: per column j, map m-block ("ovl_m") → wait slot (-1 = none). Producer: per column j,
   * map tile ("ovl_t") → notify slot (-1 = none). Several columns: a tile waits on or notifies several slots.
   */
  slots: readonly IndexMap[];
  /**
   * Producer only: the scope of the notifies' release add (default `sys`). `gpu` when only
   * kernels of the same device wait on the slots (an SM push or tile push passes the data on
   * with its own system-scope release); a slot a host stream (copy engine) or a peer waits on
   * needs `sys`.
   */
  notifyScope?: "gpu" | "sys";
  /**
   * Producer only: when a tile's notifies are issued (default `tile`). `tile`: right after the
   * tile's stores, so each notify first waits for those stores to be written, with the tensor
   * cores idle. `next-tile`: a persistent kernel notifies tile i's slots at the top of K step 1 of
   * its tile i+1 (`notify_slot_if`: a predicated statement, a compare at every other step), by
   * when the stores are written — or, where tile i+1 notifies the same slot, with it, the two as
   * one add (tile i+1 ends later, so the slot completes when it would have); whatever is still
   * pending after tile i+1's stores (a one-step K loop), and the last run after the tile loop. A
   * slot completes one K step and an epilogue later. A kernel without a tile loop, or without a
   * loop in its tile, notifies at `tile`.
   */
  notifyAt?: "tile" | "next-tile";
  /** Producer only: tiles per row of the tile grid, printed as a constant for linearising (m, n). */
  numPidN?: number;
  /** Names of the lookup tables the maps read (become kernel parameters, in this order). */
  tables: readonly string[];
  /** Names of per-rank integer parameters the static maps use (become kernel parameters). */
  scalars?: readonly string[];
  /**
   * A body whose rows are gathered (consumer) or scattered (producer) through an index table
   * (`rows=`): the waits or notifies of a block are computed on the device from its table
   * entries, and `slots` are then maps over the variable "ovl_seg" (a segment of the block's
   * rows, see {@link GatherRows}).
   */
  gather?: GatherRows;
  /**
   * Producer with `gather` only: the rank whose signal slots a segment's notifies add to, a
   * map over "ovl_seg" (the owner of a ReduceScatter slab). The notifies then go through the
   * signal buffer's peer table (`ovl_sig_ptrs`); without it they add to this rank's slots.
   */
  owners?: IndexMap;
}

/**
 * How a block finds the rows it reads or writes (TileLink §4.1's dynamic shape map): block
 * `m` touches the rows `floor(e / divisor)` of the entries `e = rows[m * blockRows + i]`
 * below `limit` (larger entries are padding). Its waits (consumer) or notifies (producer)
 * cover every segment from the segment of its first row to that of its last: `segment`
 * maps a row ("ovl_row", in `[0, rowCount)`) to its segment, nondecreasing, and segment `s`
 * waits on or notifies `slots[j](s)`.
 */
export interface GatherRows {
  readonly blockRows: number;
  readonly divisor: number;
  readonly limit: number;
  readonly rowCount: number;
  readonly segment: IndexMap;
  /**
   * Segments in all (`segment(rowCount − 1) + 1`); a producer with `owners` needs it: it
   * notifies a block's segments as one vector of that many (rounded up to a power of two).
   * A consumer with it reads a block's slots as one such vector before its loop of waits.
   */
  readonly segmentCount?: number;
  /**
   * Optional: `limit` and the last row (`rowCount − 1`) as expressions over the program's scalars (a body serving any
   * row count prints them over its row-count parameter); `limit` and `rowCount` then describe one row count.
   */
  readonly runtime?: { readonly limit: Expr; readonly last: Expr };
}

/** The variables of a gathering consumer's maps: a gathered row, and a segment of rows. */
export const GATHER_VARIABLES = { row: "ovl_row", segment: "ovl_seg" } as const;

/** The variable a role's maps are written over. */
export const DOMAIN_VARIABLE = { consumer: "ovl_m", producer: "ovl_t" } as const;

/** The parameters the transformation appends after the tables and scalars. */
export const RUNTIME_PARAMS = {
  consumer: ["ovl_sig_ptr", "ovl_err_ptr", "ovl_rank", "ovl_epoch_ptr", "ovl_timeout_ns"],
  producer: ["ovl_sig_ptr", "ovl_rank"],
} as const;

/** The signal buffer's peer table a producer with `owners` notifies through (in place of `ovl_sig_ptr`). */
export const PEER_SIGNALS_PARAM = "ovl_sig_ptrs";

/** The parameters the transformation appends for `program` after its tables and scalars. */
export function runtimeParams(program: TileProgram): readonly string[] {
  if (program.role === "producer" && program.owners !== undefined) return [PEER_SIGNALS_PARAM, RANK_VARIABLE];
  return RUNTIME_PARAMS[program.role];
}

/** The rank id every rank-generic static map may use (a runtime parameter of both roles). */
export const RANK_VARIABLE = "ovl_rank";

/** Names the inserted code assigns (besides `ovl_slot<j>`, `ovl_vslot<j>`, `ovl_bit<j>` and `ovl_prev<j>`). */
const INSERTED_LOCALS = [
  "ovl_m",
  "ovl_mb",
  "ovl_tok",
  "ovl_t",
  "ovl_t2",
  "ovl_target",
  "ovl_ids",
  "ovl_lo",
  "ovl_hi",
  "ovl_end",
  "ovl_seg",
  "ovl_in",
  "ovl_vseg",
  "ovl_seen",
  "ovl_short",
  "ovl_waited",
];

function isInsertedName(name: string): boolean {
  const numbered = (prefix: string) =>
    name.startsWith(prefix) && name.length > prefix.length && [...name.slice(prefix.length)].every((c) => c >= "0" && c <= "9");
  const slot = numbered("ovl_slot") || numbered("ovl_vslot") || numbered("ovl_bit") || numbered("ovl_prev");
  return (
    slot || INSERTED_LOCALS.includes(name) || name === PEER_SIGNALS_PARAM || (RUNTIME_PARAMS.consumer as readonly string[]).includes(name)
  );
}

/**
 * Checks `program` against a kernel of role `role` whose kept code uses `identifiers`:
 * every name a usable, unshadowing identifier, every map over the role's variable and the
 * declared scalars, every table a map reads declared. Throws {@link LocalKernelError}.
 */
export function checkProgram(program: TileProgram, role: "consumer" | "producer", identifiers: ReadonlySet<string>, file: string): void {
  const bad = (code: "bad-program" | "bad-identifier" | "name-collision", what: string): LocalKernelError =>
    new LocalKernelError(code, file, 0, what);
  if (program.role !== role) throw bad("bad-program", `the tile program is for a ${program.role} but the kernel is annotated ${role}`);
  const scalars = program.scalars ?? [];
  const seen = new Set<string>();
  for (const name of [...program.tables, ...scalars]) {
    if (typeof name !== "string" || !isValidIdentifier(name) || !isSafeIdentifier(name)) {
      throw bad("bad-identifier", `tile program name ${JSON.stringify(name)} is not a usable Python identifier`);
    }
    if (seen.has(name)) throw bad("bad-program", `tile program name ${name} is given twice`);
    seen.add(name);
    if (isInsertedName(name)) throw bad("name-collision", `tile program name ${name} is a name the transformation inserts`);
    if (identifiers.has(name)) throw bad("name-collision", `tile program name ${name} is already used by the kernel's code`);
  }
  if (role === "producer" && (program.numPidN === undefined || !Number.isSafeInteger(program.numPidN) || program.numPidN < 1)) {
    throw bad("bad-program", `a producer's tile program needs numPidN, a positive integer (got ${String(program.numPidN)})`);
  }
  if (program.gather !== undefined) checkGather(program.gather, bad);
  for (const [what, e] of Object.entries(program.gather?.runtime ?? {})) {
    const stray = freeVariables(e).find((v) => !scalars.includes(v));
    if (stray !== undefined)
      throw bad("bad-program", `gather.runtime.${what} uses variable ${stray}, which is not one of the program's scalars`);
  }
  if (program.owners !== undefined && (role !== "producer" || program.gather === undefined)) {
    throw bad("bad-program", "owners is a gathering producer's (where each segment's notifies go); this program has no producer gather");
  }
  if (program.owners !== undefined && program.gather?.segmentCount === undefined) {
    throw bad("bad-program", "a producer with owners notifies a block's segments at once: its gather needs segmentCount");
  }
  if (program.notifyScope !== undefined) {
    if (role !== "producer") throw bad("bad-program", "notifyScope is a producer's (its notifies); a consumer only waits");
    if (program.notifyScope !== "gpu" && program.notifyScope !== "sys") {
      throw bad("bad-program", `notifyScope must be "gpu" or "sys", got ${JSON.stringify(program.notifyScope)}`);
    }
  }
  if (program.notifyAt !== undefined) {
    if (role !== "producer") throw bad("bad-program", "notifyAt is a producer's (its notifies); a consumer only waits");
    if (program.notifyAt !== "tile" && program.notifyAt !== "next-tile") {
      throw bad("bad-program", `notifyAt must be "tile" or "next-tile", got ${JSON.stringify(program.notifyAt)}`);
    }
  }
  const variable = DOMAIN_VARIABLE[role];
  const over = program.gather === undefined ? variable : GATHER_VARIABLES.segment;
  const maps: [string, IndexMap, string][] = [
    ["order", program.order, variable],
    ...program.slots.map((m, j): [string, IndexMap, string] => [`slots[${j}]`, m, over]),
    ...(program.gather === undefined
      ? []
      : [["gather.segment", program.gather.segment, GATHER_VARIABLES.row] as [string, IndexMap, string]]),
    ...(program.owners === undefined ? [] : [["owners", program.owners, GATHER_VARIABLES.segment] as [string, IndexMap, string]]),
  ];
  for (const [what, map, domain] of maps) {
    const parsed = IndexMapSchema.safeParse(map);
    if (!parsed.success) throw bad("bad-program", `${what} is not an index map: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    if (map.kind === "dynamic" && !program.tables.includes(map.table.name)) {
      throw bad("bad-program", `${what} reads table ${map.table.name}, which is not in the program's tables`);
    }
    const free = freeVariables(map.kind === "static" ? map.expr : map.index);
    const stray = free.find((v) => v !== domain && v !== RANK_VARIABLE && !scalars.includes(v));
    if (stray !== undefined)
      throw bad("bad-program", `${what} uses variable ${stray}; it is a map over ${domain}, ${RANK_VARIABLE} and the program's scalars`);
  }
}

/** A gathering program's sizes are positive integers (they are printed as literals). */
function checkGather(g: GatherRows, bad: (code: "bad-program", what: string) => LocalKernelError): void {
  for (const [name, v] of [
    ["blockRows", g.blockRows],
    ["divisor", g.divisor],
    ["limit", g.limit],
    ["rowCount", g.rowCount],
    ...(g.segmentCount === undefined ? [] : [["segmentCount", g.segmentCount] as const]),
  ] as const) {
    if (!Number.isSafeInteger(v) || v < 1) throw bad("bad-program", `gather.${name} must be a positive integer, got ${String(v)}`);
  }
  if ((g.blockRows & (g.blockRows - 1)) !== 0)
    throw bad("bad-program", `gather.blockRows (${g.blockRows}) must be a power of two (tl.arange)`);
}

/** `expr` with every occurrence of variable `from` renamed `to`. */
export function renameVariable(expr: Expr, from: string, to: string): Expr {
  switch (expr.op) {
    case "const":
      return expr;
    case "var":
      return expr.name === from ? { ...expr, name: to } : expr;
    case "add":
    case "mul":
    case "min":
    case "max":
      return { op: expr.op, args: expr.args.map((a) => renameVariable(a, from, to)) };
    default:
      return { op: expr.op, dividend: renameVariable(expr.dividend, from, to), divisor: renameVariable(expr.divisor, from, to) };
  }
}

/** `map` printed as Triton code over variable `over` in place of the role's variable. */
export function printMap(map: IndexMap, from: string, over: string, file: string): string {
  const renamed: IndexMap =
    map.kind === "static"
      ? { kind: "static", expr: renameVariable(map.expr, from, over) }
      : { kind: "dynamic", table: map.table, index: renameVariable(map.index, from, over) };
  try {
    return mapToPython(renamed, { dialect: "triton" });
  } catch (e) {
    if (e instanceof MappingError) throw new LocalKernelError("bad-program", file, 0, `cannot print an index map: ${e.message}`);
    throw e;
  }
}
