// The operator registry: one entry per compiled kind, each with its compute defaults and a
// Triton realisation; the command-line declarations are well-formed and collide with no
// shared option; compile() realises an operator through its entry.
import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import { describe, expect, it } from "vitest";
import type { OperatorKind } from "../core/operator.js";
import { SHARED_OPTIONS } from "../core/registry.js";
import { builtinBody, compileOperator, tlxBackend } from "../index.js";
import { OPERATOR_REGISTRY, operatorDefinition } from "./index.js";

const KINDS: readonly OperatorKind[] = [
  "ag-gemm",
  "gemm-rs",
  "ag-grouped-gemm",
  "gemm-ar",
  "ag-moe",
  "moe-rs",
  "ag-attention",
  "a2a-gemm",
  "ag-gemm-silu",
];

describe("operator registry", () => {
  it("has exactly one entry per compiled kind, with compute defaults and a Triton realisation", () => {
    const kinds = OPERATOR_REGISTRY.flatMap((d) => (d.kind === undefined ? [] : [d.kind]));
    expect([...kinds].sort()).toEqual([...KINDS].sort());
    for (const kind of KINDS) {
      const def = operatorDefinition(kind);
      expect(def.name).toBe(kind);
      expect(typeof def.realise).toBe("function");
      expect(def.compute.bodies ?? []).not.toContain("");
    }
    expect(new Set(OPERATOR_REGISTRY.map((d) => d.name)).size).toBe(OPERATOR_REGISTRY.length);
    expect(() => operatorDefinition("no-such" as OperatorKind)).toThrow(expect.objectContaining({ code: "unsupported-op" }));
  });

  it("declares command-line options that are unique, named like flags, and not shared ones", () => {
    const shared = new Set<string>([...SHARED_OPTIONS, "m", "n", "k", "group-m", "comm-sms", "out", "json"]);
    const offered = OPERATOR_REGISTRY.filter((d) => d.cli !== undefined);
    expect(offered.map((d) => d.name)).toEqual([
      "ag-gemm",
      "gemm-rs",
      "gemm-ar",
      "a2a-gemm",
      "ag-moe",
      "moe-rs",
      "ag-attention",
      "ag-gemm-silu",
      "mlp",
    ]);
    for (const d of offered) {
      const names = d.cli!.options.map((o) => o.name);
      expect(new Set(names).size, d.name).toBe(names.length);
      for (const o of d.cli!.options) {
        expect(o.name, d.name).toMatch(/^[a-z][a-z0-9-]*$/);
        expect(shared.has(o.name), `${d.name} --${o.name}`).toBe(false);
        if (o.type !== "switch") expect(o.value, `${d.name} --${o.name}`).toMatch(/^<.+>$/);
      }
      expect(new Set(d.cli!.shared).size, d.name).toBe(d.cli!.shared.length);
      expect(d.cli!.templates === undefined, d.name).toBe(!d.cli!.shared.includes("template"));
      expect(d.cli!.examples.length, d.name).toBeGreaterThan(0);
      for (const e of d.cli!.examples) expect(e.startsWith(`ovl emit ${d.name} `), e).toBe(true);
      // Every operator is offered in every element type (`--dtype`).
      expect(d.cli!.shared, d.name).toContain("dtype");
      // --tlx only where the entry has a TLX realisation.
      expect(d.cli!.shared.includes("tlx"), d.name).toBe(d.realiseTlx !== undefined);
    }
  });

  it("compile realises through the entry and reports the compute configuration it resolved, once", async () => {
    const plan = planSignals(
      allGatherSwizzle({ tensor: { name: "A", shape: [512, 128], dtype: "bf16" }, axis: 0, mesh: [2], split: 2, side: "push" }),
    );
    const input = {
      name: "ag",
      kind: "ag-gemm" as const,
      plan,
      body: builtinBody("gemm_tma_persistent"),
      problem: { M: 512, N: 256, K: 128 },
    };
    const triton = await compileOperator(input, undefined, { target: "h100" });
    expect(triton.backend.name).toBe("triton");
    expect(triton.compute.source).not.toBe("explicit");
    expect(triton.result.manifest.kernels.some((k) => k.constexprs.BLOCK_M === triton.operator.tile.BM)).toBe(true);
    const named = await compileOperator({ ...input, tile: { BM: 128, BN: 128, BK: 64 } });
    expect(named.compute).toEqual({ source: "explicit" });
    expect(named.operator.tile).toEqual({ BM: 128, BN: 128, BK: 64 });
    const tlx = await compileOperator({ ...input, name: "ag_tlx" }, tlxBackend(), { target: "h100" });
    expect(tlx.backend.name).toBe("tlx");
    expect(tlx.result.expect).toBeDefined();
    await expect(compileOperator({ ...input, kind: "gemm-ar", name: "ar" }, tlxBackend())).rejects.toThrow(
      /AllGather\+GEMM and GEMM\+ReduceScatter only/,
    );
  });
});
