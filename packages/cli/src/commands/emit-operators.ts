// `ovl emit <operator>`: one subcommand per entry of @ovl/tlx-emitter's operator registry that
// declares command-line options. Its flags are the entry's own declarations plus the shared
// options it names (declared once, here); its action is the operator's emission routine.
import type { Command } from "commander";
import { OPERATOR_REGISTRY, type OperatorDefinition, type OptionDeclaration, type SharedOption } from "@ovl/tlx-emitter";
import { dtypeHelp, parseDtypeFlag } from "../dtype.js";
import { CliError, UsageError } from "../errors.js";
import { printOutput, type CommandOutput, type Io } from "../io.js";
import { positiveInt } from "../options.js";
import { parseOperator, resolveProblem, TEMPLATES, type ProblemFlags } from "../problem.js";
import { parseTargetFlag, TARGET_NAMES } from "../target.js";
import { emitCommand, readKernelFile, type ComputePins } from "./emit.js";
import { anyRowsFlags, anyRowsProblem, rowsRequest } from "./rows.js";
import { emitAttentionCommand, type AttentionFlags } from "./emit-attention.js";
import { emitMoeCommand, type MoeFlags } from "./emit-moe.js";
import { emitMoeRsCommand } from "./emit-moe-rs.js";
import { emitAgGemmSiluCommand, emitMlpCommand } from "./emit-mlp.js";

/** Every flag an `ovl emit <operator>` may carry, as commander hands them over. */
export type EmitFlags = ProblemFlags &
  AttentionFlags &
  MoeFlags & {
    out?: string;
    tlx?: boolean;
    json?: boolean;
    kernel?: string;
    plan?: string;
    target?: string;
    commSms?: number;
    anyRows?: boolean;
    minRows?: number;
    maxRows?: number;
    numWarps?: number;
    numStages?: number;
    body?: string;
  };

/** How each shared option is declared: once for every operator that takes it. */
const SHARED: Readonly<Record<SharedOption, (cmd: Command, def: OperatorDefinition) => Command>> = {
  shape: (c) => c.option("--shape <name>", "a TileLink MLP shape: MLP-1 … MLP-6 (default MLP-1)"),
  "gemm-sizes": (c) =>
    c
      .option("--m <rows>", "explicit shape: rows M of the GEMM", positiveInt("--m"))
      .option("--n <cols>", "explicit shape: per-rank columns N", positiveInt("--n"))
      .option("--k <depth>", "explicit shape: depth K", positiveInt("--k")),
  dtype: (c, def) => c.option("--dtype <type>", dtypeHelp(def.name), (v: string) => parseDtypeFlag(v, def.name)),
  world: (c) => c.option("--world <ranks>", "ranks of the group (default 8)", positiveInt("--world")),
  mesh: (c) => c.option("--mesh <levels>", "mesh levels outermost first, e.g. 2x4 (instead of --world)"),
  template: (c, def) => {
    const templates = def.cli?.templates ?? TEMPLATES;
    return c.option("--template <name>", `plan template: ${templates.join(", ")} (default ${templates[0]})`);
  },
  side: (c) => c.option("--side <side>", "push or pull transfers (ring and swizzle; default push)"),
  split: (c) => c.option("--split <chunks>", "chunks per shard transfer (default 2)", positiveInt("--split")),
  backend: (c) =>
    c.option(
      "--backend <backend>",
      "transfer backend: copy-engine, sm or nvshmem (default copy-engine; nvshmem: ag-gemm, gemm-rs and the partitioned gemm-ar emit)",
    ),
  tile: (c) =>
    c.option("--tile <BMxBNxBK>", "the compute tile (default: the tuned configuration of the shape, else the operator's default)"),
  "group-m": (c) =>
    c.option("--group-m <n>", "L2 grouping of the tile order (default 8, or the tuned one without --tile)", positiveInt("--group-m")),
  sms: (c) => c.option("--sms <n>", "programs of the persistent GEMM (default 132)", positiveInt("--sms")),
  target: (c) =>
    c.option(
      "--target <gpu>",
      `whose tuned compute configurations decide the tile without --tile: ${TARGET_NAMES.join(" | ")} (default h200)`,
    ),
  tlx: (c) => c.option("--tlx", "also the TLX backend's warp-specialised kernels (the tuned TLX configuration), in <out>/tlx"),
  kernel: (c) => c.option("--kernel <file>", "your own annotated Triton kernel as the compute body (default: ovl's built-in body)"),
  plan: (c) => c.option("--plan <file>", "a chunk plan (ovl.chunk-plan/v1 JSON) in place of the template"),
  "comm-sms": (c) =>
    c.option(
      "--comm-sms <n>",
      "with --backend sm or nvshmem: programs of the push kernel, SMs the GEMM leaves free (gemm-rs over sm: the simulator's choice of 4, 8 or 16 for the target; else 16)",
      positiveInt("--comm-sms"),
    ),
  "num-warps": (c) =>
    c.option(
      "--num-warps <n>",
      "warps of the compute kernel (default: the tuned configuration of the shape, else the tile's default)",
      positiveInt("--num-warps"),
    ),
  "num-stages": (c) =>
    c.option(
      "--num-stages <n>",
      "pipeline stages of the compute kernel, at most 8 (default: the tuned configuration of the shape, else the tile's default)",
      positiveInt("--num-stages"),
    ),
  body: (c, def) =>
    c.option(
      "--body <name>",
      `the built-in body variant, with --tile: ${(def.compute?.bodies ?? []).join(", ")} (default: the tuned one, else ${def.compute?.bodies?.[0] ?? "the operator's"})`,
    ),
};

/** An operator's own option as a commander flag. */
function declare(cmd: Command, d: OptionDeclaration): Command {
  const help = d.default === undefined ? d.help : `${d.help} (default ${String(d.default)})`;
  if (d.type === "switch") return cmd.option(`--${d.name}`, help);
  const flag = `--${d.name} ${d.value ?? "<value>"}`;
  return d.type === "positive-int" ? cmd.option(flag, help, positiveInt(`--${d.name}`)) : cmd.option(flag, help);
}

/** The body file of `--kernel`, read. */
const body = (o: EmitFlags) => (o.kernel === undefined ? undefined : readKernelFile(o.kernel));

/** The fused GEMM operators' routine: a checked Problem (shape, mesh, template), then emitCommand. */
async function emitGemm(name: string, o: EmitFlags): Promise<CommandOutput> {
  const target = parseTargetFlag(o.target);
  const range = anyRowsFlags(o);
  const problem = resolveProblem(parseOperator(name), o);
  const p = range === undefined ? problem : anyRowsProblem(problem, o.backend);
  if (range !== undefined && p.backend === "nvshmem")
    throw new UsageError(
      "unsupported",
      "--any-rows moves chunks with host copies instantiated per M; drop --backend nvshmem or --any-rows",
    );
  const sources = {
    ...(o.kernel === undefined ? {} : { kernelFile: o.kernel }),
    ...(o.plan === undefined ? {} : { planFile: o.plan }),
    ...(target === undefined ? {} : { target }),
    ...(o.commSms === undefined ? {} : { commSms: o.commSms }),
    ...(range === undefined ? {} : { rows: rowsRequest(p, range, target) }),
    ...computePins(name, o),
  };
  return emitCommand(p, o.out ?? `ovl-emit/${p.operator}`, o.tlx === true, sources);
}

/**
 * `--num-warps`, `--num-stages` and `--body` as an `EmitSources` part: the compute knobs beside the
 * tile that the flags name (the tuned configuration fills the rest). A body names one of the
 * operator's built-in variants and, like the tile, pins a whole configuration, so it needs `--tile`.
 * (The compiler checks the warps and stages themselves.)
 * @throws {UsageError} a body outside the operator's family, a body without `--tile` or with `--kernel`.
 */
export function computePins(operator: string, o: Pick<EmitFlags, "numWarps" | "numStages" | "body" | "tile" | "kernel">): ComputePins {
  if (o.body === undefined) {
    return {
      ...(o.numWarps === undefined ? {} : { numWarps: o.numWarps }),
      ...(o.numStages === undefined ? {} : { numStages: o.numStages }),
    };
  }
  const family = OPERATOR_REGISTRY.find((d) => d.name === operator)?.compute?.bodies ?? [];
  const body = family.find((b) => b === o.body);
  if (body === undefined)
    throw new UsageError("usage", `--body ${o.body}: ${operator}'s built-in bodies are ${family.join(", ") || "none"}`);
  if (o.kernel !== undefined) throw new UsageError("usage", "--body names a built-in body; --kernel brings your own: give one of them");
  if (o.tile === undefined)
    throw new UsageError(
      "usage",
      `--body ${o.body} pins a configuration: give its --tile too (without --tile the tuned table picks the body)`,
    );
  return {
    body,
    ...(o.numWarps === undefined ? {} : { numWarps: o.numWarps }),
    ...(o.numStages === undefined ? {} : { numStages: o.numStages }),
  };
}

/** Each registry operator's emission routine, by name (default output folder `./ovl-emit/<operator>`). */
export const EMITTERS: Readonly<Record<string, (o: EmitFlags, out: string) => Promise<CommandOutput>>> = {
  "ag-gemm": (o) => emitGemm("ag-gemm", o),
  "gemm-rs": (o) => emitGemm("gemm-rs", o),
  "gemm-ar": (o) => emitGemm("gemm-ar", o),
  "a2a-gemm": (o) => emitGemm("a2a-gemm", o),
  "ag-moe": (o, out) => emitMoeCommand(o, out, body(o), parseTargetFlag(o.target)),
  "moe-rs": (o, out) => emitMoeRsCommand(o, out, body(o)),
  "ag-attention": (o, out) => emitAttentionCommand(o, out, body(o)),
  "ag-gemm-silu": (o, out) => emitAgGemmSiluCommand({ ...o, target: undefined }, out),
  mlp: (o, out) => emitMlpCommand({ ...o, target: parseTargetFlag(o.target) }, out),
};

/** The registry entries `ovl emit` offers: those that declare command-line options. */
export function emittedOperators(): readonly (OperatorDefinition & Required<Pick<OperatorDefinition, "cli">>)[] {
  return OPERATOR_REGISTRY.filter((d): d is OperatorDefinition & Required<Pick<OperatorDefinition, "cli">> => d.cli !== undefined);
}

/** Add `ovl emit` and one subcommand per registry operator to `program`. */
export function registerEmitCommands(program: Command, io: Io): void {
  const emit = program
    .command("emit")
    .description("plan, lower and emit a fused operator as Triton kernels plus manifest.json: ovl emit <operator> --help lists its flags")
    .showSuggestionAfterError(true)
    .showHelpAfterError("(add --help for usage)")
    .addHelpText(
      "after",
      `\nExamples:\n${emittedOperators()
        .map((d) => `  ${d.cli.examples[0]}`)
        .join("\n")}`,
    );
  for (const def of emittedOperators()) {
    const routine = EMITTERS[def.name];
    if (routine === undefined) throw new CliError("unsupported", `the operator registry's ${def.name} has no emission routine in the CLI`);
    const cmd = emit.command(def.name).description(def.summary);
    for (const s of def.cli.shared) SHARED[s](cmd, def);
    for (const d of def.cli.options) declare(cmd, d);
    cmd
      .option("--out <dir>", `where the kernels and manifest go (default ./ovl-emit/${def.name})`)
      .option("--json", "print what was written as JSON")
      .addHelpText("after", `\nExamples:\n${def.cli.examples.map((e) => `  ${e}`).join("\n")}`)
      .action(async (o: EmitFlags) => {
        printOutput(io, await routine(o, o.out ?? `ovl-emit/${def.name}`), o.json === true);
      });
  }
}
