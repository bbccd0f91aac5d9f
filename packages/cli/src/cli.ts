// The `ovl` command line (commander): one subcommand per box of the pipeline — plan,
// validate, emit, simulate, tune, run, report — and `demo`, the whole tour. Every command
// has --help; results go to stdout (text, or JSON with --json), progress to stderr.
import { Command, CommanderError } from "commander";
import { positiveInt, problemOptions } from "./options.js";
import { CliError, UsageError } from "./errors.js";
import { processIo, printOutput, type Io } from "./io.js";
import { EMIT_OPERATORS, OPERATORS, parseOperator, resolveProblem, type ProblemFlags } from "./problem.js";
import { planCommand } from "./commands/plan.js";
import { invalidPlanError, planOfTarget, validateCommand } from "./commands/validate.js";
import { emitCommand, readKernelFile } from "./commands/emit.js";
import { parseTargetFlag, TARGET_NAMES } from "./target.js";
import { emitAttentionCommand, type AttentionFlags } from "./commands/emit-attention.js";
import { emitMoeCommand, type MoeFlags } from "./commands/emit-moe.js";
import { emitMoeRsCommand } from "./commands/emit-moe-rs.js";
import { emitAgGemmSiluCommand, emitMlpCommand } from "./commands/emit-mlp.js";
import { runCommand, type RunFlags } from "./commands/run.js";
import { reportCommand } from "./commands/report.js";
import { registerModelCommands } from "./commands/register-model.js";
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

  problemOptions(
    program
      .command("emit")
      .argument("<operator>", [...EMIT_OPERATORS, "ag-attention", "ag-moe", "moe-rs", "ag-gemm-silu", "mlp"].join(" | ")),
    {
      gemm: true,
    },
  )
    .description("plan, lower and emit a fused operator as Triton kernels plus manifest.json")
    .option("--seq <S>", "ag-attention: global sequence length S (each rank holds S / world positions)", positiveInt("--seq"))
    .option("--heads <H>", "ag-attention: query heads", positiveInt("--heads"))
    .option("--kv-heads <Hkv>", "ag-attention: key/value heads (default --heads; fewer: GQA)", positiveInt("--kv-heads"))
    .option("--head-dim <D>", "ag-attention: head dimension (16 ... 256, a power of two)", positiveInt("--head-dim"))
    .option("--causal", "ag-attention: the query at position i attends keys at positions <= i")
    .option("--tokens <T>", "ag-moe, moe-rs: tokens of every rank (each rank holds its share; --m too)", positiveInt("--tokens"))
    .option("--hidden <H>", "ag-moe, moe-rs: hidden size (ag-moe: --k too; moe-rs: --n too)", positiveInt("--hidden"))
    .option(
      "--intermediate <I>",
      "ag-moe, moe-rs: this rank's intermediate columns (ag-moe: --n too; moe-rs: --k too)",
      positiveInt("--intermediate"),
    )
    .option("--experts <E>", "ag-moe, moe-rs: number of experts", positiveInt("--experts"))
    .option("--topk <k>", "ag-moe, moe-rs: experts per token (at most --experts)", positiveInt("--topk"))
    .option("--choices <ids>", "ag-moe, moe-rs: the experts a checked run's random routing draws from, e.g. 0,2,3 (default all)")
    .option("--out <dir>", "where the kernels and manifest go (default ./ovl-emit/<operator>)")
    .option("--tlx", "ag-gemm, gemm-rs: also the TLX backend's warp-specialised kernels (the tuned TLX configuration), in <out>/tlx")
    .option("--kernel <file>", "your own annotated Triton kernel as the compute body (default: ovl's built-in body)")
    .option("--plan <file>", "a chunk plan (ovl.chunk-plan/v1 JSON) in place of the template")
    .option(
      "--target <gpu>",
      `whose tuned compute configurations decide the tile without --tile: ${TARGET_NAMES.join(" | ")} (default h200)`,
    )
    .option(
      "--comm-sms <n>",
      "with --backend sm: programs of the push kernel, SMs the GEMM leaves free (gemm-rs default: the simulator's choice of 4, 8 or 16 for the target; else 16)",
      positiveInt("--comm-sms"),
    )
    .option("--json", "print what was written as JSON")
    .addHelpText(
      "after",
      "\nExamples:\n  ovl emit ag-gemm --shape MLP-1 --world 4 --out mlp1 --tlx\n  ovl emit gemm-rs --shape MLP-2 --world 2 --backend sm\n  ovl emit ag-gemm --shape MLP-1 --world 4 --kernel my_matmul.py --plan my_plan.json\n  ovl emit ag-attention --seq 16384 --heads 32 --head-dim 128 --causal --world 8 --template ring\n  ovl emit moe-rs --tokens 8192 --hidden 2048 --intermediate 192 --experts 8 --topk 2 --world 8",
    )
    .action(
      async (
        operator: string,
        o: ProblemFlags &
          AttentionFlags &
          MoeFlags & { out?: string; tlx?: boolean; json?: boolean; kernel?: string; plan?: string; target?: string; commSms?: number },
      ) => {
        const target = parseTargetFlag(o.target);
        if (target !== undefined && (operator === "ag-attention" || operator === "ag-gemm-silu"))
          throw new UsageError("unsupported", `${operator} reads no tuned table (its tile is its own default or --tile); drop --target`);
        if (operator === "ag-moe") {
          if (o.tlx === true || o.plan !== undefined || o.shape !== undefined)
            throw new UsageError(
              "unsupported",
              "ag-moe takes --tokens/--hidden/--intermediate/--experts/--topk and a template, not --tlx, --plan or --shape",
            );
          const body = o.kernel === undefined ? undefined : readKernelFile(o.kernel);
          printOutput(io, await emitMoeCommand(o, o.out ?? "ovl-emit/ag-moe", body, target), o.json === true);
          return;
        }
        if (operator === "moe-rs") {
          if (o.tlx === true || o.plan !== undefined || o.shape !== undefined || target !== undefined)
            throw new UsageError(
              "unsupported",
              "moe-rs takes --tokens/--hidden/--intermediate/--experts/--topk, --world, --split and --tile, not --tlx, --plan, --shape or --target",
            );
          const body = o.kernel === undefined ? undefined : readKernelFile(o.kernel);
          printOutput(io, await emitMoeRsCommand(o, o.out ?? "ovl-emit/moe-rs", body), o.json === true);
          return;
        }
        if (operator === "ag-gemm-silu") {
          if (o.tlx === true || o.plan !== undefined || o.shape !== undefined || o.kernel !== undefined)
            throw new UsageError(
              "unsupported",
              "ag-gemm-silu takes --m/--n/--k (or --tokens/--intermediate/--hidden), --world, --split, --tile",
            );
          printOutput(io, await emitAgGemmSiluCommand({ ...o, target }, o.out ?? "ovl-emit/ag-gemm-silu"), o.json === true);
          return;
        }
        if (operator === "mlp") {
          if (o.tlx === true || o.plan !== undefined || o.shape !== undefined || o.kernel !== undefined)
            throw new UsageError(
              "unsupported",
              "mlp takes --tokens/--hidden/--intermediate/--world/--split/--tile, not --tlx, --plan, --shape or --kernel",
            );
          printOutput(io, await emitMlpCommand({ ...o, target }, o.out ?? "ovl-emit/mlp"), o.json === true);
          return;
        }
        if (operator === "ag-attention") {
          if (o.tlx === true || o.plan !== undefined || o.shape !== undefined)
            throw new UsageError(
              "unsupported",
              "ag-attention takes --seq/--heads/--kv-heads/--head-dim/--causal and a template, not --tlx, --plan or --shape",
            );
          const body = o.kernel === undefined ? undefined : readKernelFile(o.kernel);
          printOutput(io, await emitAttentionCommand(o, o.out ?? "ovl-emit/ag-attention", body), o.json === true);
          return;
        }
        const p = resolveProblem(parseOperator(operator, EMIT_OPERATORS), o);
        const out = o.out ?? `ovl-emit/${p.operator}`;
        const sources = {
          ...(o.kernel === undefined ? {} : { kernelFile: o.kernel }),
          ...(o.plan === undefined ? {} : { planFile: o.plan }),
          ...(target === undefined ? {} : { target }),
          ...(o.commSms === undefined ? {} : { commSms: o.commSms }),
        };
        printOutput(io, await emitCommand(p, out, o.tlx === true, sources), o.json === true);
      },
    );

  registerModelCommands(program, io);

  program
    .command("run")
    .argument("<manifest>", "an ovl.manifest/v1 file (e.g. from ovl emit)")
    .description("run a manifest through the Python runner: emulated on the CPU, or on N GPUs under torchrun")
    .option("--emulate", "run on the CPU, ranks as threads (the default without --gpus)")
    .option("--gpus <n>", "run on N GPUs: torchrun --nproc_per_node=N -m ovl_runtime run …", positiveInt("--gpus"))
    .option("--dry-run", "with --gpus: print the torchrun command only")
    .option("--baselines", "GPU: also time torch GEMM, the NCCL collective, both in sequence, and async-TP")
    .option("--epochs <n>", "checked launches (default: the manifest's timing.checkRuns)", positiveInt("--epochs"))
    .option("--out <file>", "where the report goes (default report.json beside the manifest)")
    .option("--python <path>", "the Python interpreter (default: runtime-py's .venv, else python3)")
    .option("--json", "print the report (ovl.report/v1) as JSON")
    .addHelpText("after", "\nExamples:\n  ovl run mlp1/manifest.json --emulate\n  ovl run mlp1/manifest.json --gpus 4 --baselines")
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
