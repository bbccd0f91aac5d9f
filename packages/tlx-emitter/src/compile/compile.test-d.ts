// Type tests of the compile path's public API: what a user (or a downstream compiler) writes
// against compile(), Operator, Backend and the local-kernel functions. The package imports
// itself, so these check the published declarations (dist/index.d.ts), not the sources.
import type { ChunkPlan } from "@ovl/chunk-plan";
import {
  builtinBody,
  compile,
  parseLocalKernel,
  resolveCompute,
  tlxBackend,
  transformLocalKernel,
  tritonBackend,
  type Backend,
  type ComputeChoice,
  type EmitResult,
  type KernelBody,
  type LocalKernel,
  type LocalKernelOutput,
  type Manifest,
  type Operator,
  type OperatorInput,
  type TileProgram,
} from "@ovl/tlx-emitter";
import { describe, expectTypeOf, it } from "vitest";

describe("compile path types", () => {
  it("compile takes an operator (its tile optional) and an optional Backend and resolves to kernels plus a manifest", () => {
    expectTypeOf(compile).parameter(0).toEqualTypeOf<OperatorInput>();
    expectTypeOf<Operator>().toMatchTypeOf<OperatorInput>();
    expectTypeOf<OperatorInput["tile"]>().toEqualTypeOf<Operator["tile"] | undefined>();
    expectTypeOf(compile).parameter(1).toEqualTypeOf<Backend | undefined>();
    expectTypeOf(compile).returns.toEqualTypeOf<Promise<EmitResult>>();
    expectTypeOf<EmitResult["manifest"]>().toEqualTypeOf<Manifest>();
  });

  it("resolveCompute decides every knob: backends see a tiled Operator", () => {
    expectTypeOf(resolveCompute).returns.toEqualTypeOf<{ op: Operator; choice: ComputeChoice }>();
    expectTypeOf<Backend["realise"]>().parameter(0).toEqualTypeOf<Operator>();
  });

  it("backends are values implementing one contract", () => {
    expectTypeOf(tritonBackend).toEqualTypeOf<Backend>();
    expectTypeOf(tlxBackend).returns.toEqualTypeOf<Backend>();
    expectTypeOf<Backend["refusal"]>().returns.toEqualTypeOf<string | undefined>();
    expectTypeOf<Backend["specificationVersion"]>().toEqualTypeOf<"ovl.backend/v1">();
  });

  it("an Operator needs a kind, a plan, a body, a problem and a tile", () => {
    expectTypeOf<Operator["kind"]>().toMatchTypeOf<string>();
    expectTypeOf<Operator["plan"]>().toEqualTypeOf<ChunkPlan>();
    expectTypeOf<Operator["body"]>().toEqualTypeOf<KernelBody>();
    expectTypeOf(builtinBody).returns.toEqualTypeOf<KernelBody>();
    // @ts-expect-error a body is a file, not a bare string
    const bad: Operator["body"] = "kernel.py";
    void bad;
  });

  it("local kernels parse asynchronously and transform synchronously", () => {
    expectTypeOf(parseLocalKernel).returns.toEqualTypeOf<Promise<LocalKernel>>();
    expectTypeOf(transformLocalKernel).parameter(1).toEqualTypeOf<TileProgram>();
    expectTypeOf(transformLocalKernel).returns.toEqualTypeOf<LocalKernelOutput>();
  });
});
