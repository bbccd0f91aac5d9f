// ovl's annotations of a local kernel: `# ovl: ...` comments (so the kernel still runs as
// plain Triton). This module reads their words; where each may stand is checked by the caller.
import { LocalKernelError } from "./errors.js";
import { lineOf, walk, type SyntaxNode } from "./parser.js";

/**
 * `# ovl: consumer gather=<param> [rows=<param>]` / `# ovl: producer scatter=<param> [rows=<param> [blocks=<param>]]`.
 * `rows=` names the index table a consumer reads its gathered rows through, or a producer
 * writes its scattered rows through (a MoE body's `sorted_token_ids`): block m touches the
 * rows its table entries name, so its waits or notifies are computed from the table on the
 * device. `blocks=` (a producer with `rows=`) names the input the body reads in the table's
 * block order (row `m·BLOCK_M + i` is the row of entry `i` of block m), so its blocks are
 * contiguous and load by TMA; the operator fills it from the rows in their own order.
 */
export interface RoleAnnotation {
  kind: "role";
  role: "consumer" | "producer";
  param: string;
  rows?: string;
  blocks?: string;
  comment: SyntaxNode;
}

/** `# ovl: tile-loop`, trailing the persistent kernel's `for` line. */
export interface TileLoopAnnotation {
  kind: "tile-loop";
  comment: SyntaxNode;
}

/** `# ovl: tile m=<var> [n=<var>]`, trailing a statement that sets the tile coordinates. */
export interface TileAnnotation {
  kind: "tile";
  m: string;
  n?: string;
  comment: SyntaxNode;
}

/**
 * `# ovl: tile kv=<var>`, trailing a statement in an inner `for` loop that sets the block of
 * the gathered operand's rows the iteration reads (an attention body's kv block): the
 * iteration waits there, not per tile.
 */
export interface KvTileAnnotation {
  kind: "kv-tile";
  kv: string;
  comment: SyntaxNode;
}

export type Annotation = RoleAnnotation | TileLoopAnnotation | TileAnnotation | KvTileAnnotation;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The text after `ovl:` when `comment` is an ovl annotation, else undefined. */
function ovlBody(comment: string): string | undefined {
  const body = comment.slice(1).trim();
  if (!body.startsWith("ovl:")) return undefined;
  return body.slice("ovl:".length).trim();
}

/** Every `# ovl:` comment of the module, parsed; throws `bad-annotation` on unknown words. */
export function readAnnotations(root: SyntaxNode, file: string): Annotation[] {
  const out: Annotation[] = [];
  for (const node of walk(root)) {
    if (node.type !== "comment") continue;
    const body = ovlBody(node.text);
    if (body !== undefined) out.push(parseAnnotation(body, node, file));
  }
  return out;
}

function parseAnnotation(body: string, comment: SyntaxNode, file: string): Annotation {
  const bad = (what: string): LocalKernelError =>
    new LocalKernelError("bad-annotation", file, lineOf(comment), `${what} in annotation "# ovl: ${body}"`);
  const [head, ...rest] = body.split(/\s+/).filter((w) => w.length > 0);
  const pairs = keyValues(rest, bad);
  const only = (allowed: readonly string[]): void => {
    for (const key of pairs.keys()) {
      if (!allowed.includes(key)) throw bad(`unknown key "${key}" (expected ${allowed.map((k) => `${k}=`).join(" or ") || "none"})`);
    }
  };
  switch (head) {
    case "consumer":
    case "producer": {
      const key = head === "consumer" ? "gather" : "scatter";
      only(head === "consumer" ? [key, "rows"] : [key, "rows", "blocks"]);
      const param = pairs.get(key);
      if (param === undefined) throw bad(`a ${head} names its operand with ${key}=<parameter>`);
      const rows = pairs.get("rows");
      const blocks = pairs.get("blocks");
      if (blocks !== undefined && rows === undefined)
        throw bad("blocks=<parameter> reads an input in the order of the rows= index table; name the table with rows=<parameter>");
      return {
        kind: "role",
        role: head,
        param,
        ...(rows === undefined ? {} : { rows }),
        ...(blocks === undefined ? {} : { blocks }),
        comment,
      };
    }
    case "tile-loop":
      only([]);
      return { kind: "tile-loop", comment };
    case "tile": {
      only(["m", "n", "kv"]);
      const kv = pairs.get("kv");
      if (kv !== undefined) {
        if (pairs.size > 1) throw bad("a kv block statement names only its block variable: # ovl: tile kv=<var>");
        return { kind: "kv-tile", kv, comment };
      }
      const m = pairs.get("m");
      if (m === undefined)
        throw bad("a tile statement names its row-block variable with m=<var> (or an inner loop's kv block with kv=<var>)");
      const n = pairs.get("n");
      return n === undefined ? { kind: "tile", m, comment } : { kind: "tile", m, n, comment };
    }
    default:
      throw bad(`unknown annotation "${head ?? ""}" (expected consumer, producer, tile-loop or tile)`);
  }
}

function keyValues(words: readonly string[], bad: (what: string) => LocalKernelError): Map<string, string> {
  const pairs = new Map<string, string>();
  for (const word of words) {
    const eq = word.indexOf("=");
    if (eq <= 0) throw bad(`"${word}" is not key=value`);
    const key = word.slice(0, eq);
    const value = word.slice(eq + 1);
    if (!NAME.test(value)) throw bad(`"${value}" is not a Python identifier`);
    if (pairs.has(key)) throw bad(`"${key}" given twice`);
    pairs.set(key, value);
  }
  return pairs;
}
