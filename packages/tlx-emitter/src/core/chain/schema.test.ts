import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compileMlp } from "../../index.js";
import { EmitError } from "../writer/index.js";
import { Chain, chainJsonSchemaText } from "./schema.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const TILE = { BM: 32, BN: 32, BK: 32 };

describe("ovl.chain/v1", () => {
  it("schema/chain.schema.json and the runner's copy equal fresh output (run `pnpm build` to refresh them)", () => {
    expect(readFileSync(join(root, "schema", "chain.schema.json"), "utf8")).toBe(chainJsonSchemaText());
    const runner = join(root, "..", "runtime-py", "src", "ovl_runtime", "schema", "chain.schema.json");
    expect(readFileSync(runner, "utf8")).toBe(chainJsonSchemaText());
  });

  it("refuses stage paths that leave the chain's folder", () => {
    const ok = { name: "s", manifest: "up/manifest.json" };
    const base = {
      $schema: "ovl.chain/v1",
      name: "c",
      world: 2,
      dtype: "bf16",
      stages: [ok, ok],
      links: [{ from: { stage: 0, buffer: "a" }, to: { stage: 1, buffer: "b" } }],
      reference: {
        operator: "mlp",
        M: 4,
        hidden: 4,
        intermediate: 4,
        inputs: {},
        output: { stage: 1, buffer: "o" },
        tolerance: 0.1,
      },
    };
    expect(Chain.safeParse(base).success).toBe(true);
    for (const bad of ["../x/manifest.json", "/abs/manifest.json", "up/../../m.json"]) {
      expect(Chain.safeParse({ ...base, stages: [ok, { name: "s", manifest: bad }] }).success).toBe(false);
    }
  });
});

describe("compileMlp", () => {
  it("links the up stage's [M, I] output to the down stage's A and states the MLP's shapes", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 1, max: 2 }),
        async (world, blocks, h, i) => {
          const M = world * blocks * 32;
          const hidden = h * 32;
          const intermediate = i * 32;
          const { chain, stages } = await compileMlp({ name: "mlp", world, M, hidden, intermediate, upTile: TILE, downTile: TILE });
          const [up, down] = stages.map((s) => s.result.manifest);
          expect(up!.reference.operator).toBe("ag-gemm-silu");
          expect(down!.reference.operator).toBe("gemm-rs");
          const [link] = chain.links;
          const y = up!.buffers.find((b) => b.name === link!.from.buffer)!;
          const a = down!.buffers.find((b) => b.name === link!.to.buffer)!;
          expect(y.shape).toEqual([M, intermediate]);
          expect(a.shape).toEqual([M, intermediate]);
          expect(down!.buffers.find((b) => b.name === down!.reference.inputs.B)!.shape).toEqual([intermediate, hidden]);
          expect(chain.reference).toMatchObject({ operator: "mlp", M, hidden, intermediate });
          expect(Chain.parse(JSON.parse(JSON.stringify(chain)))).toEqual(chain);
        },
      ),
      { numRuns: 6 },
    );
  });

  it("refuses M that is not a multiple of the world", async () => {
    const err = await compileMlp({ name: "mlp", world: 3, M: 100, hidden: 32, intermediate: 32 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmitError);
    expect((err as Error).message).toMatch(/multiple of the world/);
  });
});
