// `ovl candidates <operator>`: the compute configurations an on-device tuner should time for an
// operator's per-rank GEMM (`computeCandidates`), as text or as `ovl.compute-candidates/v1` JSON,
// which the runtime's tuner reads (it never re-implements the table lookup or the model).
import type { Command } from "commander";
import { DEFAULT_TARGET } from "@ovl/primitives";
import { CANDIDATE_OPERATORS, computeCandidates, DEFAULT_TOP_K, type CandidateList } from "../candidates.js";
import { printOutput, type CommandOutput, type Io } from "../io.js";
import { positiveInt, problemOptions } from "../options.js";
import { parseOperator, resolveProblem, type Problem, type ProblemFlags } from "../problem.js";
import { parseTargetFlag, TARGET_NAMES } from "../target.js";
import { anyRowsFlags, anyRowsProblem, defaultMaxRows } from "./rows.js";

/** Schema id of the JSON `ovl candidates --json` prints. */
export const CANDIDATES_SCHEMA = "ovl.compute-candidates/v1";

/** Flags of `ovl candidates`. */
export interface CandidatesFlags extends ProblemFlags {
  target?: string;
  topK?: number;
  nearest?: number;
  neighbours?: number;
  commSms?: number;
  anyRows?: boolean;
  minRows?: number;
  maxRows?: number;
  out?: string;
  json?: boolean;
}

/** The command's output: the JSON document and its text rendering. */
export function candidatesOutput(p: Problem, list: CandidateList, topK: number, rows: { max: number } | undefined): CommandOutput {
  const json = {
    $schema: CANDIDATES_SCHEMA,
    operator: list.operator,
    role: list.role,
    problem: { M: p.M, N: p.N, K: p.K, world: p.world, split: p.split, backend: p.backend, dtype: "bf16" },
    ...(rows === undefined ? {} : { rows }),
    target: list.target,
    gridSms: list.gridSms,
    ...(list.commSms === undefined ? {} : { commSms: list.commSms }),
    table: list.table,
    topK,
    candidates: list.candidates,
    refused: list.refused,
  };
  const fmt = (ms: number) => (Number.isFinite(ms) ? `${(ms * 1e3).toFixed(0)} us` : "-");
  const lines = [
    `${p.operator} (M=${p.M} N=${p.N} K=${p.K}) on ${p.world} ranks${rows === undefined ? "" : `, any row count up to ${rows.max}`}: ${list.role} GEMM on ${list.gridSms} SMs of ${list.target}${list.commSms === undefined ? "" : ` (${list.commSms} left to the push kernel)`}`,
    `  table pick: ${list.table}`,
    `  ${"#".padEnd(3)}${"source".padEnd(9)}${"predicted".padStart(10)}  configuration`,
    ...list.candidates.map(
      (c) =>
        `  ${String(c.rank).padEnd(3)}${c.source.padEnd(9)}${fmt(c.predictedMs).padStart(10)}  ${c.key}${c.entry === undefined ? "" : `  (won at M=${c.entry.M} N=${c.entry.N} K=${c.entry.K})`}`,
    ),
    ...list.candidates.flatMap((c) => (c.dir === undefined ? [] : [`wrote ${c.dir}`])),
    ...list.refused.map((r) => `  refused ${r.key} (${r.source}): ${r.reason}`),
  ];
  return { json, lines };
}

/** Run `ovl candidates`. */
export async function candidatesCommand(operator: string, o: CandidatesFlags): Promise<CommandOutput> {
  const anyRows = anyRowsFlags(o);
  const problem = resolveProblem(parseOperator(operator, CANDIDATE_OPERATORS), o);
  const p = anyRows === undefined ? problem : anyRowsProblem(problem, o.backend);
  const target = parseTargetFlag(o.target) ?? DEFAULT_TARGET.name;
  const topK = o.topK ?? DEFAULT_TOP_K;
  const list = await computeCandidates(p, {
    target,
    topK,
    ...(o.nearest === undefined ? {} : { nearest: o.nearest }),
    ...(o.neighbours === undefined ? {} : { neighbours: o.neighbours }),
    ...(o.commSms === undefined ? {} : { commSms: o.commSms }),
    ...(anyRows === undefined ? {} : { anyRows }),
    ...(o.out === undefined ? {} : { out: o.out }),
  });
  const rows = anyRows === undefined ? undefined : { max: anyRows.maxRows ?? defaultMaxRows(p.world) };
  return candidatesOutput(p, list, topK, rows);
}

/** Add `ovl candidates` to the program. */
export function registerCandidatesCommand(program: Command, io: Io): void {
  problemOptions(program.command("candidates").argument("<operator>", CANDIDATE_OPERATORS.join(" | ")), { gemm: false })
    .description(
      "the compute configurations worth timing on the device for an operator's per-rank GEMM: the tuned table's pick, the winners at its nearest measured shapes, the pick's neighbours (one setting changed), the compute model's best; each compiled in memory, those the operator cannot take refused",
    )
    .option("--target <gpu>", `whose table and model: ${TARGET_NAMES.join(" | ")} (default ${DEFAULT_TARGET.name})`)
    .option("--top-k <k>", `candidates at most, the table pick included (default ${DEFAULT_TOP_K})`, positiveInt("--top-k"))
    .option("--nearest <n>", "of them, winners of the table's nearest other shapes at most (default 2)", positiveInt("--nearest"))
    .option(
      "--neighbours <n>",
      "of them, neighbours of the table's pick (one setting changed) at most (default 3)",
      positiveInt("--neighbours"),
    )
    .option("--comm-sms <n>", "with --backend sm: the push kernel's SMs, as ovl emit takes it", positiveInt("--comm-sms"))
    .option("--any-rows", "candidates of the operator compiled for every row count (as ovl emit --any-rows)")
    .option("--min-rows <M>", "with --any-rows: the fewest rows served", positiveInt("--min-rows"))
    .option("--max-rows <M>", "with --any-rows: the most rows served (default 32768)", positiveInt("--max-rows"))
    .option("--out <dir>", "also write each candidate's compiled operator (as ovl emit with its flags) into <dir>/c<rank>")
    .option("--json", `print ${CANDIDATES_SCHEMA} JSON`)
    .addHelpText(
      "after",
      "\nExamples:\n  ovl candidates ag-gemm --m 24576 --n 2560 --k 5120 --world 3 --top-k 5\n  ovl candidates gemm-rs --m 6144 --n 6144 --k 4096 --world 6 --backend sm --json",
    )
    .action(async (operator: string, o: CandidatesFlags) => {
      printOutput(io, await candidatesCommand(operator, o), o.json === true);
    });
}
