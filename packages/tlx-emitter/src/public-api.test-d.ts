// Type tests of @ovl/tlx-emitter's public surface beyond compile() (see compile/compile.test-d.ts),
// as published: the package imports itself, so these check dist/index.d.ts. Run by `vitest`
// (typecheck mode, tsconfig.test-d.json) after the build.
import type { ChunkPlan, TileSchedule } from "@ovl/chunk-plan";
import {
  type Chain,
  type ChainResult,
  type EmitError,
  type EmitErrorCode,
  type EmitOptions,
  type EmitResult,
  type EmittedFile,
  type LocalKernelError,
  type LocalKernelErrorCode,
  Manifest,
  type MlpInput,
  compileMlp,
  emitAgGemm,
  emitGemmRs,
  emitManifestJson,
} from "@ovl/tlx-emitter";
import { describe, expectTypeOf, it } from "vitest";

describe("@ovl/tlx-emitter public types", () => {
  it("the template emitters take a plan and its tile schedule and return files plus a manifest", () => {
    expectTypeOf(emitAgGemm).parameters.toEqualTypeOf<[plan: ChunkPlan, schedule: TileSchedule, options?: EmitOptions]>();
    expectTypeOf(emitAgGemm).returns.toEqualTypeOf<EmitResult>();
    expectTypeOf(emitGemmRs).returns.toEqualTypeOf<EmitResult>();
    expectTypeOf<EmitResult["files"]>().toEqualTypeOf<EmittedFile[]>();
    expectTypeOf<EmittedFile>().toHaveProperty("path").toEqualTypeOf<string>();
    expectTypeOf<EmittedFile>().toHaveProperty("text").toEqualTypeOf<string>();
  });

  it("manifests: a zod schema and a canonical JSON printer", () => {
    expectTypeOf(Manifest.parse).returns.toEqualTypeOf<Manifest>();
    expectTypeOf<Manifest["$schema"]>().toEqualTypeOf<"ovl.manifest/v1">();
    expectTypeOf(emitManifestJson).parameters.toEqualTypeOf<[manifest: Manifest]>();
    expectTypeOf(emitManifestJson).returns.toEqualTypeOf<string>();
  });

  it("the MLP chain compiles into a chain file and its stages", () => {
    expectTypeOf(compileMlp).parameter(0).toEqualTypeOf<MlpInput>();
    expectTypeOf(compileMlp).returns.toEqualTypeOf<Promise<ChainResult>>();
    expectTypeOf<ChainResult["chain"]>().toEqualTypeOf<Chain>();
    expectTypeOf<ChainResult["stages"][number]["result"]>().toEqualTypeOf<EmitResult>();
  });

  it("errors carry closed code unions; a local kernel's are a subset of the emitter's", () => {
    expectTypeOf<EmitError["code"]>().toEqualTypeOf<EmitErrorCode>();
    expectTypeOf<EmitErrorCode>().toEqualTypeOf<
      | "bad-identifier"
      | "reserved-identifier"
      | "bad-literal"
      | "bad-text"
      | "unbalanced-indent"
      | "bad-param"
      | "bad-plan"
      | "bad-schedule"
      | "unsupported-op"
      | "unsupported-dependency"
      | "bad-manifest"
      | "syntax-error"
      | "no-annotation"
      | "bad-annotation"
      | "unknown-parameter"
      | "unsafe-tile-loop"
      | "unsafe-load"
      | "unsafe-store"
      | "name-collision"
      | "bad-import"
      | "bad-signature"
      | "bad-program"
    >();
    expectTypeOf<LocalKernelErrorCode>().toMatchTypeOf<EmitErrorCode>();
    expectTypeOf<LocalKernelError["code"]>().toEqualTypeOf<LocalKernelErrorCode>();
  });
});
