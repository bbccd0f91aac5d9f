import { describe, expect, it } from "vitest";
import {
  agGemmConsumerSource,
  gemmProducerSource,
  ringReduceSource,
  rsReduceSource,
  smPullSource,
  smPushSource,
} from "../backends/triton/kernels/index.js";
import { parseWithPython } from "../testing/python.js";
import { exampleManifests } from "../index.js";

describe("every emitted file is Python", () => {
  it("python3 ast.parse accepts every file of every example and every template", () => {
    const files: Record<string, string> = {};
    const shapes = [undefined, { world: 4, M: 2048, N: 1024, K: 512, split: 2, tile: { BM: 128, BN: 256, BK: 64 } }];
    shapes.forEach((shape, i) => {
      for (const [name, r] of Object.entries(exampleManifests(shape))) for (const f of r.files) files[`${i}/${name}/${f.path}`] = f.text;
    });
    const gemm = { M: 256, N: 128, K: 64, BLOCK_M: 64, BLOCK_N: 64, BLOCK_K: 32, GROUP_M: 4 };
    for (const dtype of ["bf16", "fp16", "fp32"] as const) {
      files[`${dtype}/ag.py`] = agGemmConsumerSource(gemm, { dtype });
      files[`${dtype}/producer.py`] = gemmProducerSource(gemm, { dtype });
      files[`${dtype}/rs.py`] = rsReduceSource({ WORLD: 4, BLOCK_M: 64, BLOCK_N: 64, N: 128, rows_per_rank: 64 }, { dtype });
      files[`${dtype}/push.py`] = smPushSource({ BLOCK: 512 }, { dtype });
      files[`${dtype}/pull.py`] = smPullSource({ BLOCK: 512 }, { dtype });
      files[`${dtype}/ring.py`] = ringReduceSource({ BLOCK: 512 }, { dtype });
    }
    // A control: the check must be able to fail.
    files["control/broken.py"] = "def f(:\n    pass\n";
    const result = parseWithPython(files);
    expect(result["control/broken.py"]).toMatch(/line 1/);
    delete result["control/broken.py"];
    expect(Object.keys(result).length).toBeGreaterThanOrEqual(8 + 18);
    expect(Object.entries(result).filter(([, v]) => v !== "ok")).toEqual([]);
  });
});
