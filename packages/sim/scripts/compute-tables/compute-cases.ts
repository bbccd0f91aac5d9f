// The bench mode of emit-compute.ts: per shape, the compute kernel compile() emits for the
// operator with no tile (the tuned table's configuration), the same configuration as the
// plain body, the previous fixed default emitted, and (with --alternatives) other measured
// configurations emitted — each as compute_bench.py launches it: rank 0 of a split-1 plan,
// every signal already at its target, so waits pass at once (AG+GEMM) or notifies only add
// (GEMM+RS).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { allGatherSwizzle, planSignals, reduceScatterDirect, type ChunkPlan } from "@ovl/chunk-plan";
import {
  COMPUTE_BODIES,
  computeMeasurementSet,
  computeMisfit,
  computeModel,
  rankComputeConfigs,
  type ComputeConfig,
} from "../../src/index.js";
import { DEFAULT_TARGET, type TargetName } from "@ovl/primitives";
import {
  builtinBody,
  compile,
  emitManifestJson,
  resolveCompute,
  tritonBackend,
  type BuiltinBodyName,
  type EmitResult,
  type KernelArg,
  type OperatorInput,
} from "@ovl/tlx-emitter";
import { correct, entryConfig, type ComputeResults } from "./compute-table.js";
import { computeShapes, type ComputeShape } from "./compute-shapes.js";
import { plainLaunch, previousDefault, zerosArg, type CaseArg, type ComputeBenchFile, type ComputeCase } from "./emit-compute.js";

/** The operator of a shape: split-1 AllGather of A or direct ReduceScatter of C on `world` ranks, the family's base body. */
export function shapeOperator(s: Pick<ComputeShape, "name" | "op" | "world" | "M" | "N" | "K">): OperatorInput {
  const plan: ChunkPlan =
    s.op === "ag-gemm"
      ? planSignals(
          allGatherSwizzle({ tensor: { name: "A", shape: [s.M, s.K], dtype: "bf16" }, axis: 0, mesh: [s.world], split: 1, side: "push" }),
        )
      : planSignals(
          reduceScatterDirect({
            tensor: { name: "C", shape: [s.M, s.N], dtype: "bf16" },
            src: "C_partial",
            axis: 0,
            mesh: [s.world],
            split: 1,
            afterCompute: true,
          }),
        );
  const body = builtinBody(s.op === "ag-gemm" ? "gemm_tma_persistent" : "gemm_producer");
  return { name: s.name, kind: s.op, plan, body, problem: { M: s.M, N: s.N, K: s.K } };
}

/** `op` pinned to configuration `c` (explicit tile, grouping, launch and body). */
export function pinned(op: OperatorInput, c: ComputeConfig, name: string): OperatorInput {
  return {
    ...op,
    name,
    body: builtinBody(c.body as BuiltinBodyName),
    tile: { BM: c.BM, BN: c.BN, BK: c.BK },
    groupM: c.groupM,
    options: { numWarps: c.numWarps, numStages: c.numStages },
  };
}

/** Template kinds of the compute kernel of a compiled operator: transformed bodies and the TLX kernels. */
const COMPUTE_KINDS: readonly string[] = ["local-consumer", "local-producer", "tlx-ag-gemm", "tlx-gemm-rs"];

/** The compute kernel of a compiled operator as a case (TLX ones with their cubin and metadata paths). */
export function emittedCase(
  r: EmitResult,
  out: string,
  label: string,
  config: ComputeConfig,
  role: NonNullable<ComputeCase["role"]>,
  s: Pick<ComputeShape, "M" | "N">,
): ComputeCase {
  const k = r.manifest.kernels.find((x) => COMPUTE_KINDS.includes(x.template.kind));
  if (k === undefined) throw new Error(`${label}: no compute kernel in the manifest`);
  const file = r.files.find((f) => f.path === k.source);
  if (file === undefined) throw new Error(`${label}: ${k.source} was not emitted`);
  // A precompiled (TLX) kernel: the whole manifest in a folder of its own, for the AOT compile.
  const dir = k.precompiled === undefined ? "emitted" : `emitted/${r.manifest.name}`;
  mkdirSync(join(out, dir), { recursive: true });
  writeFileSync(join(out, dir, k.source), file.text);
  if (k.precompiled !== undefined) {
    writeFileSync(join(out, dir, "manifest.json"), emitManifestJson(r.manifest));
    writeFileSync(join(out, dir, "expect.json"), `${JSON.stringify(r.expect ?? {}, null, 2)}\n`);
  }
  const p = k.template.params;
  const consumer = k.template.kind === "local-consumer" || k.template.kind === "tlx-ag-gemm";
  // Transformed bodies name their operands in the template's params; TLX kernels by argument name.
  const operand = (name: string, buffer: string): "a" | "b" | "c" | undefined =>
    k.precompiled !== undefined
      ? ({ a_ptr: "a", b_ptr: "b", c_ptr: "c" } as const)[name as "a_ptr" | "b_ptr" | "c_ptr"]
      : buffer === p.a
        ? "a"
        : buffer === p.b
          ? "b"
          : buffer === p.c
            ? "c"
            : undefined;
  const tables = new Map(r.manifest.tables.map((t) => [t.name, t.values[0]!]));
  const arg = (name: string, v: KernelArg): CaseArg => {
    switch (v.kind) {
      case "buffer": {
        const which = operand(name, v.name);
        if (which !== undefined) return { name, kind: which };
        if (v.name === r.manifest.signals.buffer) return { name, kind: "signals", size: r.manifest.signals.slots, value: consumer ? 1 : 0 };
        const scratch = zerosArg(
          name,
          r.manifest.buffers.find((b) => b.name === v.name),
        );
        if (scratch !== undefined) return scratch;
        throw new Error(`${label}: buffer ${v.name} is not A, B, C, the signals or zeroed fp32/int32 scratch`);
      }
      case "table":
        return { name, kind: "table", values: tables.get(v.name)! };
      case "int":
        return { name, kind: "int", value: v.value };
      case "rank":
        return { name, kind: "int", value: 0 };
      case "epoch":
        return { name, kind: "int", value: 1 };
      case "epoch-target":
        return { name, kind: "int", value: v.arrivals };
      case "epoch-word":
        return { name, kind: "table", values: [1] };
      case "timeout-ns":
        return { name, kind: "i64", value: r.manifest.waitTimeoutNs };
      case "error-buffer":
        return { name, kind: "error" };
      default:
        throw new Error(`${label}: argument ${name} of kind ${v.kind} is not bound by compute_bench.py`);
    }
  };
  return {
    label,
    kind: "emitted",
    file: `${dir}/${k.source}`,
    ...(k.precompiled === undefined ? {} : { cubin: `${dir}/${k.precompiled.cubin}`, metadata: `${dir}/${k.precompiled.metadata}` }),
    entry: k.entry,
    config,
    args: k.args.map((a) => arg(a.name, a.value)),
    constexprs: Object.fromEntries(Object.entries(k.constexprs).map(([n, v]) => [n, Number(v)])),
    tiles: Math.ceil(s.M / config.BM) * Math.ceil(s.N / config.BN),
    role,
  };
}

function key(c: ComputeConfig): string {
  return `${c.body} ${c.BM}x${c.BN}x${c.BK} g${c.groupM} s${c.numStages} w${c.numWarps}`;
}

/**
 * The bench file: per shape, `tuned` (compile() with no tile), `tuned-plain`, `previous`
 * (the fixed default before tuned tables, emitted) and, given a sweep's results, up to
 * `alternatives` more of its fastest configurations, emitted. The file records the target
 * and the table (its own or the one it borrows) the tuned cases came from.
 */
export async function benchCases(
  out: string,
  options: {
    readonly sweep?: string;
    readonly alternatives?: number;
    readonly modelK?: number;
    readonly modelRoles?: readonly string[];
    /** Whose tuned table the `tuned` cases take, as `compile(op, tritonBackend, { target })` (default: the default target). */
    readonly target?: TargetName;
    /**
     * Other body variants of a shape's family to measure at the tuned configuration's tile,
     * grouping and launch (and at the previous default's), emitted: e.g. a stream-K tail
     * against the whole-wave body it would replace.
     */
    readonly bodies?: readonly string[];
    /** Only the shapes of these operators (default: every shape). */
    readonly ops?: readonly string[];
  } = {},
): Promise<{ file: ComputeBenchFile; bodies: Set<string> }> {
  mkdirSync(join(out, "emitted"), { recursive: true });
  const sweep = options.sweep === undefined ? undefined : (JSON.parse(readFileSync(options.sweep, "utf8")) as ComputeResults);
  const bodies = new Set<string>();
  const shapes = [];
  const target = options.target ?? DEFAULT_TARGET.name;
  const tables = new Set<TargetName>();
  for (const s of computeShapes().filter((x) => options.ops === undefined || options.ops.includes(x.op))) {
    const op = shapeOperator(s);
    const { op: tuned, choice } = resolveCompute(op, { target });
    if (choice.source !== "table")
      throw new Error(`${s.name}: no tuned entry for ${target} (${choice.source === "default" ? choice.reason : choice.source})`);
    tables.add(choice.target);
    const config = entryConfig(choice.entry);
    const cases: ComputeCase[] = [];
    cases.push(emittedCase(await compile(op, tritonBackend, { target }), out, `emitted ${key(config)}`, config, "tuned", s));
    if (tuned.body.path !== `${config.body}.py`) throw new Error(`${s.name}: compile() chose ${tuned.body.path}, the table ${config.body}`);
    bodies.add(config.body);
    cases.push({
      label: `plain ${key(config)}`,
      kind: "plain",
      file: `kernels/${config.body}.py`,
      entry: config.body,
      config,
      role: "tuned-plain",
      ...plainLaunch(s, config),
    });
    const old = previousDefault(s.role);
    cases.push(emittedCase(await compile(pinned(op, old, `${s.name}_previous`)), out, `emitted ${key(old)}`, old, "previous", s));
    const seen = new Set([key(config), key(old)]);
    let v = 0;
    for (const body of (options.bodies ?? []).filter((b) => COMPUTE_BODIES.some((x) => x.name === b && x.role === s.role))) {
      for (const at of [config, old]) {
        const c = { ...at, body };
        if (seen.has(key(c)) || computeMisfit(c, "bf16", computeModel(target)) !== undefined) continue;
        seen.add(key(c));
        cases.push(emittedCase(await compile(pinned(op, c, `${s.name}_variant${v++}`)), out, `emitted ${key(c)}`, c, "alternative", s));
      }
    }
    const useModel = options.modelK !== undefined && (options.modelRoles ?? ["consumer", "producer"]).includes(s.role);
    if (useModel) {
      // The model's measurement set, emitted (for bodies no earlier sweep measured as they are now).
      const { ranked } = rankComputeConfigs({ role: s.role, M: s.M, N: s.N, K: s.K, dtype: "bf16" }, { model: computeModel(target) });
      const rank = new Map(ranked.map((r, i) => [r.key, i]));
      let n = 0;
      for (const r of computeMeasurementSet(ranked, options.modelK ?? 12)) {
        if (seen.has(key(r.config))) continue;
        seen.add(key(r.config));
        const alt = await compile(pinned(op, r.config, `${s.name}_model${n++}`));
        cases.push({
          ...emittedCase(alt, out, `emitted ${key(r.config)}`, r.config, "alternative", s),
          predictedMs: r.predictedMs,
          modelRank: rank.get(r.key) ?? rank.get(r.key.replace(/ g\d+ /, " g8 ")) ?? -1,
        });
      }
    }
    const shape = sweep?.shapes.find((x) => x.name === s.name);
    if (shape !== undefined && !useModel) {
      const ranked = shape.cases.filter((c) => c.kind === "plain" && correct(c)).sort((a, b) => a.ms! - b.ms!);
      let n = 0;
      for (const c of ranked) {
        if (n >= (options.alternatives ?? 3)) break;
        if (seen.has(key(c.config))) continue;
        seen.add(key(c.config));
        const alt = await compile(pinned(op, c.config, `${s.name}_alt${n}`));
        cases.push(emittedCase(alt, out, `emitted ${key(c.config)}`, c.config, "alternative", s));
        n++;
      }
    }
    shapes.push({ ...s, dtype: "bf16" as const, cases });
  }
  const file: ComputeBenchFile = { schema: "ovl.compute-bench/v1", mode: "bench", target, tables: [...tables].sort(), shapes };
  return { file, bodies };
}
