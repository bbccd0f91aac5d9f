"""The emitter's own GEMM+RS manifests (copy engine and SM push), emulated over several epochs.

They come from the built ``@ovl/tlx-emitter`` (``pnpm --filter @ovl/tlx-emitter build``):
coalesced chunk deliveries, the producer's sending order and rs-reduce's arrival-slot table
must together give the exact ReduceScatter of the GEMM for every world and chunking.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ovl_runtime import emulate, parse_manifest

EMITTER = Path(__file__).resolve().parents[2] / "tlx-emitter" / "dist" / "index.js"

SCRIPT = """
const { exampleManifests } = await import(process.argv[1]);
const out = {};
for (const world of [2, 3, 4]) for (const split of [1, 2]) {
  const res = exampleManifests({ world, M: 64 * world * 2 * split, N: 96, K: 64, split, tile: { BM: 64, BN: 64, BK: 32 } });
  for (const name of ["gemm_rs_ce", "gemm_rs_sm"]) out[`${name}_w${world}_s${split}`] = res[name].manifest;
}
console.log(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def emitted() -> dict:
    node = shutil.which("node")
    if node is None or not EMITTER.exists():
        pytest.skip(f"needs node and {EMITTER} (built by the @ovl/tlx-emitter build)")
    run = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT, EMITTER.as_uri()], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(run.stdout)


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("split", [1, 2])
@pytest.mark.parametrize("backend", ["ce", "sm"])
def test_emitted_gemm_rs_is_correct_over_three_epochs(emitted, world, split, backend):
    d = emitted[f"gemm_rs_{backend}_w{world}_s{split}"]
    if backend == "ce":
        for h in d["hostOps"]:
            copies = [op for s in h["streams"] for op in s["ops"] if op["kind"] == "copy"]
            # Every peer's chunks; the rank's own partial is reduced in place.
            assert len(copies) == (world - 1) * split and all("signal" in c for c in copies)
            assert all(c["dst"]["rank"] != h["rank"] for c in copies)
    out = emulate(parse_manifest(d), epochs=3, seed=world * 10 + split)
    assert out.failures == [] and out.ok and len(out.checks) == 3
