// Runs a lowered program end to end on small integer tensors: the chunk plan moves each
// rank's shards (runPlan), every rank computes its share of the loop nest from its own
// buffers only, and the output is assembled from the ranks that end up holding it.
import { FrontendError } from "../errors.js";
import { emptyValues, regionIndices, runPlan } from "../execute.js";
import { bufferOf, bufferShape } from "./ir.js";
import { interpret, type PatchKernel, type Tensor } from "./interpret.js";
import { rankEnv } from "./analyze.js";
import { type LoweredProgram, partialOutput } from "./lower.js";

function inside(region: { offsets: readonly number[]; sizes: readonly number[] }, idx: readonly number[]): boolean {
  return idx.every((x, d) => x >= region.offsets[d]! && x < region.offsets[d]! + region.sizes[d]!);
}

/**
 * Distributed execution of `lowered` on `inputs` (row-major, global). Each rank starts with
 * only its held shards; reading anything the plan did not deliver throws `execution`. Returns
 * the global output; replicas that disagree throw. Compare with {@link interpret} of the
 * program to check the lowering.
 */
export function runLowered(
  lowered: LoweredProgram,
  inputs: Readonly<Record<string, Tensor>>,
  kernels?: Readonly<Record<string, PatchKernel>>,
): number[] {
  const { facts, plan } = lowered;
  const p = facts.program;
  const byName = new Map(facts.buffers.map((f) => [f.buffer, f]));
  const out = byName.get(p.output)!;
  const reduced = out.comm !== "local";
  const values = emptyValues(plan, (r, t, idx) => {
    const f = byName.get(t.name);
    if (f === undefined || f.role !== "read" || !inside(f.held[r]!, idx)) return undefined;
    const flat = idx.reduce((acc, x, d) => acc * t.shape[d]! + x, 0);
    return inputs[t.name]?.[flat];
  });
  const compute = (): void => {
    values.forEach((mine, r) => {
      const target = mine.get(reduced ? partialOutput(p.output) : p.output)!;
      const acc = interpret(p, inputs, {
        ...(kernels === undefined ? {} : { kernels }),
        fixed: rankEnv(facts.mesh, facts.levels, r),
        read: (buffer, flat) => {
          const x = mine.get(buffer)?.[flat];
          if (x === undefined)
            throw new FrontendError("execution", `rank ${r} reads element ${flat} of ${buffer}, which the plan never delivered`);
          return x;
        },
      });
      for (const i of regionIndices(out.held[r]!, out.tensor.shape)) target[i] = acc[i]!;
    });
  };
  runPlan(plan, values, compute);
  const shape = bufferShape(p, bufferOf(p, p.output));
  const result: (number | undefined)[] = new Array(shape.reduce((a, b) => a * b, 1)).fill(undefined);
  values.forEach((mine, r) => {
    const arr = mine.get(p.output)!;
    for (const i of regionIndices(out.needed[r]!, shape)) {
      const x = arr[i];
      if (x === undefined) throw new FrontendError("execution", `rank ${r} ends without element ${i} of ${p.output}`);
      if (result[i] !== undefined && result[i] !== x)
        throw new FrontendError("execution", `replicas of ${p.output}[${i}] disagree: ${result[i]} vs ${x} on rank ${r}`);
      result[i] = x;
    }
  });
  return result.map((x, i) => {
    if (x === undefined) throw new FrontendError("execution", `no rank holds element ${i} of ${p.output}`);
    return x;
  });
}
