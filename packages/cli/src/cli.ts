// The `ovl` command line (commander): one subcommand per box of the pipeline — plan,
// validate, emit, simulate, tune, run, report — and `demo`, the whole tour. Every command
// has --help; results go to stdout (text, or JSON with --json), progress to stderr.
import { Command, CommanderError } from "commander";
import { positiveInt, problemOptions } from "./options.js";
import { CliError } from "./errors.js";
import { processIo, printOutput, type Io } from "./io.js";
import { OPERATORS, parseOperator, resolveProblem, type ProblemFlags } from "./problem.js";
import { planCommand } from "./commands/plan.js";
import { invalidPlanError, planOfTarget, validateCommand } from "./commands/validate.js";
import { runCommand, type RunFlags } from "./commands/run.js";
import { reportCommand } from "./commands/report.js";
import { registerModelCommands } from "./commands/register-model.js";
import { registerEmitCommands } from "./commands/emit-operators.js";
import { registerCandidatesCommand } from "./commands/candidates.js";
import { runDemo } from "./demo.js";

/** Build the `ovl` program writing to `io`; `setExit` receives a command's own exit status. */
export function buildProgram(io: Io, setExit: (code: number) => void): Command {
  const program = new Command("ovl")
    .description("ovl — compute–communication overlapped GPU kernels: plan → validate → emit → simulate → tune → run → report")
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showSuggestionAfterError(true)
    .showHelpAfterError("(add --help for usage)");

  problemOptions(program.command("plan").argument("<operator>", OPERATORS.join(" | ")), { gemm: false })
    .description("build an operator's chunk plan from a template and print it (or write plan.json/.txt/.mmd with --out)")
    .option("--out <dir>", "write plan.json, plan.txt and plan.mmd here")
    .option("--json", "print the plan as ovl.chunk-plan/v1 JSON")
    .addHelpText(
      "after",
      "\nExamples:\n  ovl plan ag-gemm --shape MLP-1 --world 8 --split 2\n  ovl plan all-gather --mesh 2x4 --template hierarchical --json > plan.json",
    )
    .action((operator: string, o: ProblemFlags & { out?: string; json?: boolean }) => {
      printOutput(io, planCommand(resolveProblem(parseOperator(operator), o), o.out), o.json === true);
    });

  problemOptions(program.command("validate").argument("<plan|operator>", "a plan JSON file, or an operator to plan first"), { gemm: false })
    .description("prove a plan: exactly-once writes, dependencies, no deadlock, no race, symbolic execution of its collective")
    .option("--json", "print the verdict as JSON")
    .addHelpText("after", "\nExamples:\n  ovl validate plan.json\n  ovl validate reduce-scatter --world 4 --template ring --json")
    .action((target: string, o: ProblemFlags & { json?: boolean }) => {
      const plan = planOfTarget(target, o);
      const verdict = validateCommand(plan);
      printOutput(io, verdict, o.json === true);
      if (!verdict.ok) {
        if (o.json === true) setExit(1);
        else throw invalidPlanError(plan);
      }
    });

  registerEmitCommands(program, io);

  registerModelCommands(program, io);

  registerCandidatesCommand(program, io);

  program
    .command("run")
    .argument("<manifest>", "an ovl.manifest/v1 file (e.g. from ovl emit)")
    .description("run a manifest through the Python runner: emulated on the CPU, or on N GPUs under torchrun")
    .option("--emulate", "run on the CPU, ranks as threads (the default without --gpus)")
    .option(
      "--engine <engine>",
      "CPU emulation engine: numpy (ovl's numpy models of the kernels), interpret (the kernels' own source under Triton's CPU interpreter; needs torch and triton, fails if missing) or auto (default: the interpreter for a compiled local body where torch and triton are installed, else numpy where every kernel has a numpy model; the output says which ran)",
    )
    .option("--gpus <n>", "run on N GPUs: torchrun --nproc_per_node=N -m ovl_runtime run …", positiveInt("--gpus"))
    .option("--dry-run", "with --gpus: print the torchrun command only")
    .option("--baselines", "GPU: also time torch GEMM, the NCCL collective, both in sequence, and async-TP")
    .option("--epochs <n>", "checked launches (default: the manifest's timing.checkRuns)", positiveInt("--epochs"))
    .option("--out <file>", "where the report goes (default report.json beside the manifest)")
    .option("--python <path>", "the Python interpreter (default: runtime-py's .venv, else python3)")
    .option("--json", "print the report (ovl.report/v1) as JSON")
    .addHelpText(
      "after",
      "\nExamples:\n  ovl run mlp1/manifest.json --emulate\n  ovl run mlp1/manifest.json --engine interpret\n  ovl run mlp1/manifest.json --gpus 4 --baselines",
    )
    .action(async (manifest: string, o: RunFlags & { json?: boolean }) => {
      printOutput(io, await runCommand(manifest, o, io), o.json === true);
    });

  program
    .command("report")
    .argument("<reports...>", "ovl.report/v1 files")
    .description("print reports side by side: ovl's time, the baselines of the same run, the speed-up")
    .option("--svg <file>", "also write a bar chart of ovl against the baselines (SVG)")
    .option("--json", "print the rows as JSON")
    .addHelpText("after", "\nExamples:\n  ovl report mlp1/report.json mlp2/report.json\n  ovl report runs/*/report.json --svg latency.svg")
    .action(async (files: string[], o: { json?: boolean; svg?: string }) => {
      printOutput(io, await reportCommand(files, o.svg), o.json === true);
    });

  program
    .command("demo")
    .description("the tour: plan AG+GEMM for MLP-1 on the H200 model, validate, emit, simulate, chart, report (CPU, no GPU needed)")
    .option("--world <ranks>", "ranks (default 2: the configuration measured on H200s)", positiveInt("--world"))
    .option("--split <chunks>", "chunks per shard transfer (default 2)", positiveInt("--split"))
    .option("--out <dir>", "where the artefacts go (default ./ovl-demo)")
    .option("--gpus <n>", "run the emitted MLP-1 manifest on N GPUs through runtime-py (world = N)", positiveInt("--gpus"))
    .option("--no-emulate", "skip the small CPU emulation run")
    .option("--python <path>", "the runner's Python interpreter (default: runtime-py's .venv, else python3)")
    .option("--json", "print the demo's summary as JSON")
    .addHelpText("after", "\nExamples:\n  ovl demo\n  ovl demo --gpus 4 --out demo-4")
    .action(
      async (o: { world?: number; split?: number; out?: string; gpus?: number; emulate?: boolean; python?: string; json?: boolean }) => {
        const result = await runDemo({
          world: o.world ?? o.gpus ?? 2,
          split: o.split ?? 2,
          outDir: o.out ?? "ovl-demo",
          emulate: o.emulate !== false,
          ...(o.gpus !== undefined ? { gpus: o.gpus } : {}),
          ...(o.python !== undefined ? { python: o.python } : {}),
          write: o.json === true ? (line: string) => io.err(`${line}\n`) : (line: string) => io.out(`${line}\n`),
          progress: io,
        });
        if (o.json === true) io.out(`${JSON.stringify(result.summary, null, 2)}\n`);
      },
    );

  return program;
}

/** Run the CLI on `argv` (without node and script); resolves with the exit status. */
export async function runCli(argv: readonly string[], io: Io = processIo): Promise<number> {
  let status = 0;
  const program = buildProgram(io, (code) => {
    status = code;
  });
  try {
    await program.parseAsync([...argv], { from: "user" });
    return status;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    if (e instanceof CliError) {
      io.err(`ovl: ${e.message}\n`);
      return e.exitCode;
    }
    const code = (e as { code?: unknown }).code;
    const message = e instanceof Error ? e.message : String(e);
    // The libraries' typed errors here come from the flags (a split too fine for the shape, a tile the kernel refuses).
    if (typeof code === "string") {
      io.err(`ovl: ${message} (${code})\n`);
      return 2;
    }
    io.err(`ovl: ${e instanceof Error && e.stack ? e.stack : message}\n`);
    return 1;
  }
}
