// The two commands that need the cost model: `ovl simulate` and `ovl tune`.
import type { Command } from "commander";
import { problemOptions, positiveInt } from "../options.js";
import { printOutput, type Io } from "../io.js";
import { GEMM_OPERATORS, parseOperator, resolveProblem, type ProblemFlags } from "../problem.js";
import { DEVICES, simulateCommand } from "./simulate.js";
import { DEFAULT_CACHE, tuneCommand, type TuneFlags } from "./tune.js";

/** Add `simulate` and `tune` to the program. */
export function registerModelCommands(program: Command, io: Io): void {
  problemOptions(program.command("simulate").argument("<operator>", GEMM_OPERATORS.join(" | ")), { gemm: true })
    .description("predict a fused operator on a hardware model: latency, non-overlapped time, bound, overlap ratio, timeline")
    .option("--device <model>", `hardware model: ${DEVICES.join(", ")} (default H200_SXM)`)
    .option(
      "--comm-sms <n>",
      "SMs driving copies with --backend sm (gemm-rs default: the push SMs ovl emit gives it, chooseCommSms on the model; else 16)",
      positiveInt("--comm-sms"),
    )
    .option("--svg <file>", "write the per-rank timeline chart (SVG)")
    .option("--out <file>", "write the full simulation (ovl.sim-result/v1, with every timeline event)")
    .option("--json", "print the figures as JSON")
    .addHelpText(
      "after",
      "\nExamples:\n  ovl simulate ag-gemm --shape MLP-1 --world 8 --svg timeline.svg\n  ovl simulate gemm-rs --shape MLP-2 --world 4 --backend sm --comm-sms 16 --json",
    )
    .action(
      async (operator: string, o: ProblemFlags & { device?: string; commSms?: number; svg?: string; out?: string; json?: boolean }) => {
        const p = resolveProblem(parseOperator(operator, GEMM_OPERATORS), o);
        printOutput(io, await simulateCommand(p, o), o.json === true);
      },
    );

  problemOptions(program.command("tune").argument("<operator>", GEMM_OPERATORS.join(" | ")), { gemm: false, knobs: false })
    .description(
      "search split × backend × comm SMs × tile × swizzle by the model; with --gpus (or --measurements of a GPU run), measure the best k and the non-overlapped baseline and decide from the measurements",
    )
    .option("--device <model>", `hardware model the search ranks on: ${DEVICES.join(", ")} (default H200_SXM)`)
    .option("--top-k <k>", "with --gpus or --measurements: overlapped candidates to measure (default 3)", positiveInt("--top-k"))
    .option("--gpus <n>", "measure the best k on N GPUs through runtime-py (N = --world)", positiveInt("--gpus"))
    .option("--cache <file>", `tuning cache (default ${DEFAULT_CACHE})`)
    .option("--no-cache", "neither read nor write the cache")
    .option("--python <path>", "with --gpus: the Python interpreter")
    .option("--measurements <file>", "times of a GPU run (ovl.tune-measurements/v1): decide from them instead of --gpus")
    .option("--json", "print the result as JSON")
    .addHelpText(
      "after",
      "\nExamples:\n  ovl tune ag-gemm --shape MLP-1 --world 8\n  ovl tune gemm-rs --shape MLP-2 --world 4 --gpus 4 --top-k 3\n  ovl tune ag-gemm --shape MLP-1 --world 4 --measurements measured.json",
    )
    .action(async (operator: string, o: ProblemFlags & TuneFlags & { json?: boolean }) => {
      const p = resolveProblem(parseOperator(operator, GEMM_OPERATORS), o);
      printOutput(io, await tuneCommand(p, o, io), o.json === true);
    });
}
