// A manifest whose row count is a run-time argument, made concrete for one M: what the runner
// does (in Python) before it binds an operator to a new row count, and what the compiler's
// checks and the emulation do here. The instantiated manifest is an ordinary one.
import { evaluate, substitute, type Expr, type IndexMap } from "@ovl/mapping";
import { EmitError } from "../writer/index.js";
import type { HostOp, Kernel, KernelArg, Manifest, RankHostOps, Rows } from "./schema.js";
import { validated } from "./validate.js";

/** Whether `M` is a row count `rows` serves (in its range, a multiple of its `multiple`). */
export function servesRows(rows: Rows, M: number): boolean {
  return Number.isSafeInteger(M) && M >= rows.range.min && M <= rows.range.max && M % rows.multiple === 0;
}

/** A `rows` argument's value at `M`: M / `divisor`. @throws {EmitError} `bad-manifest` when it does not divide M. */
function rowsArg(m: Manifest, divisor: number, M: number): number {
  if (M % divisor)
    throw new EmitError(
      "bad-manifest",
      `manifest ${m.name}: a rows argument divides the rows by ${divisor}, which ${M} is not a multiple of`,
    );
  return M / divisor;
}

/**
 * `m` at `M` rows: an ordinary manifest (no `rows`). Expressions are evaluated with the manifest's row variable.
 * @throws {EmitError} `bad-param` when `m` has no rows or does not serve `M`; `bad-manifest` when an evaluated size is not positive.
 */
export function instantiateRows(m: Manifest, M: number): Manifest {
  const rows = m.rows;
  if (rows === undefined) throw new EmitError("bad-param", `manifest ${m.name} has fixed rows (${m.reference.M}); it takes no row count`);
  if (!servesRows(rows, M)) {
    throw new EmitError(
      "bad-param",
      `manifest ${m.name} serves row counts ${rows.range.min}..${rows.range.max} in multiples of ${rows.multiple}, not ${M}`,
    );
  }
  const env = { [rows.variable]: M };
  const size = (e: Expr, what: string): number => {
    const v = evaluate(e, env);
    if (!(v > 0)) throw new EmitError("bad-manifest", `manifest ${m.name} at ${M} rows: ${what} is ${v}`);
    return v;
  };
  const buffers = m.buffers.map((b) => {
    const e = rows.buffers[b.name];
    return e === undefined ? b : { ...b, shape: [size(e, `buffer ${b.name}'s rows`), ...b.shape.slice(1)] };
  });
  const hostOps: RankHostOps[] = rows.hostOps.map((r) => ({
    rank: r.rank,
    streams: r.streams.map((s) => ({
      name: s.name,
      ops: s.ops.map((op, i): HostOp => {
        const seg = (x: typeof op.src, end: string) => ({
          buffer: x.buffer,
          rank: x.rank,
          offset: evaluate(x.offset, env),
          length: size(x.length, `rank ${r.rank} stream ${s.name} op ${i} ${end} length`),
        });
        return {
          kind: "copy",
          src: seg(op.src, "src"),
          dst: seg(op.dst, "dst"),
          ...(op.signal === undefined ? {} : { signal: op.signal }),
        };
      }),
    })),
  }));
  const numPidM = size(rows.numPidM, "numPidM");
  const bindMap = (map: IndexMap): IndexMap =>
    map.kind === "static" ? { kind: "static", expr: substitute(map.expr, env) } : { ...map, index: substitute(map.index, env) };
  const kernels: Kernel[] = m.kernels.map((k) => {
    const more = rows.kernels?.[k.name];
    const int = (e: Expr, what: string): number => {
      const v = evaluate(e, env);
      if (!Number.isSafeInteger(v) || v < 0) throw new EmitError("bad-manifest", `manifest ${m.name} at ${M} rows: ${what} is ${v}`);
      return v;
    };
    const arg = (a: Kernel["args"][number]): KernelArg => {
      const e = more?.args?.[a.name];
      if (e !== undefined) return { kind: "int", value: int(e, `kernel ${k.name}'s argument ${a.name}`) };
      return a.value.kind === "rows" ? { kind: "int", value: rowsArg(m, a.value.divisor ?? 1, M) } : a.value;
    };
    // A body whose M takes the row count describes it in its template's sizes too (the emulation reads them).
    const params = {
      ...k.template.params,
      ...(k.args.some((a) => a.value.kind === "rows") && "M" in k.template.params ? { M } : {}),
      ...Object.fromEntries(Object.entries(more?.params ?? {}).map(([p, e]) => [p, int(e, `kernel ${k.name}'s template param ${p}`)])),
    };
    const tp = k.tileProgram;
    const gather = tp?.gather;
    return {
      ...k,
      args: k.args.map((a) => ({ name: a.name, value: arg(a) })),
      template: { ...k.template, params },
      ...(more?.grid === undefined ? {} : { grid: more.grid.map((e, i) => size(e, `kernel ${k.name}'s grid[${i}]`)) }),
      ...(tp === undefined
        ? {}
        : {
            tileProgram: {
              ...tp,
              order: bindMap(tp.order),
              slots: tp.slots.map(bindMap),
              numPidM,
              ...(gather === undefined
                ? {}
                : {
                    gather: {
                      ...gather,
                      segment: bindMap(gather.segment),
                      ...(more?.gather === undefined
                        ? {}
                        : {
                            limit: size(more.gather.limit, `kernel ${k.name}'s gather limit`),
                            rowCount: size(more.gather.rowCount, `kernel ${k.name}'s gather rowCount`),
                          }),
                    },
                  }),
            },
          }),
    };
  });
  const tables = m.tables.map((t) => {
    const e = rows.tables?.[t.name];
    if (e === undefined) return t;
    if (e.length !== t.values.length || e.some((r, i) => r.length !== t.values[i]!.length)) {
      throw new EmitError("bad-manifest", `manifest ${m.name}: rows.tables.${t.name} is not shaped like table ${t.name}`);
    }
    return { ...t, values: e.map((r) => r.map((x) => evaluate(x, env))) };
  });
  const { rows: _rows, ...rest } = m;
  const perRank = m.reference.rowsPerRank === undefined ? {} : { rowsPerRank: M / m.world };
  return validated({ ...rest, buffers, tables, hostOps, kernels, reference: { ...m.reference, M, ...perRank } });
}
