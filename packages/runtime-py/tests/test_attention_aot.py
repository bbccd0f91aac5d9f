"""ag-attention's emitted kernel compiles ahead of time for sm_90a (no GPU needed) at an Attn-1
per-rank shape of world 8, and its PTX shows the grouped waits' shape: the kv loop, non-causal
and causal (its skip clipped into each arrival group's range), is software-pipelined (``cp.async`` copies) and the kernel has one wait site (a first acquire load and
its spin), where the body with a wait per kv block (a kv loop not of the grouped form) has its
wait copied into the pipelined loop's stages. Whether that is faster is for the GPU run
(``packages/bench/gpu/attention-gpu.sh``). In a process of its own: the compile needs Triton out
of the interpreter mode that ``conftest`` sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import builders
import pytest

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allGatherSwizzle, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const attention = { S: c.S, heads: c.heads, kvHeads: c.heads, headDim: 128, causal: c.causal };
  const o = { tensor: { name: "kv", shape: [c.S, 2 * c.heads * 128], dtype: "bf16" }, axis: 0, mesh: [8], split: 2, side: "push" };
  const body = ovl.builtinBody("flash_attention");
  // "kv_blk = it * 1" is not the grouped form: that body keeps a wait per kv block.
  const source = c.perBlock ? body.source.replaceAll("kv_blk = it  # ovl", "kv_blk = it * 1  # ovl") : body.source;
  const r = await ovl.compile({
    name: c.name, kind: "ag-attention", plan: planSignals(allGatherSwizzle(o)), body: { ...body, source },
    problem: ovl.attentionGemmView(attention), attention, tile: { BM: 128, BN: 64, BK: 128 }, options: { dtype: "bf16" },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

CASES = [
    ("grouped", 16384, 32, False, False),
    ("per_block", 16384, 32, False, True),
    ("grouped_causal", 16384, 32, True, False),
]

CODE = r"""
import importlib.util, json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ovl_runtime import language

assert not language.INTERPRET
out = {}
for folder in sys.argv[1:]:
    m = json.load(open(f"{folder}/manifest.json"))
    (k,) = m["kernels"]
    spec = importlib.util.spec_from_file_location("attn", f"{folder}/{k['source']}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = getattr(mod, k["entry"])
    dtypes = {b["name"]: b["dtype"] for b in m["buffers"]}
    ptr = {"bf16": "*bf16", "uint32": "*i32", "int32": "*i32"}
    kinds = {"table": "*i32", "int": "i32", "rank": "i32", "epoch-word": "*i32", "error-buffer": "*i32", "timeout-ns": "i64"}
    sig = {a["name"]: ptr[dtypes[a["value"]["name"]]] if a["value"]["kind"] == "buffer" else kinds[a["value"]["kind"]] for a in k["args"]}
    cx = k["constexprs"]
    # The runtime's specialisation: 16-byte aligned pointers and sizes that are multiples of 16.
    aligned = [a for a, t in sig.items() if t.startswith("*") or a in ("SQ", "SKV")]
    src = ASTSource(
        fn=fn,
        signature={**sig, **{c: "constexpr" for c in cx}},
        constexprs={(fn.arg_names.index(c),): v for c, v in cx.items()},
        attrs={(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in aligned},
    )
    opts = {"num_warps": k["numWarps"], "num_stages": k["numStages"]}
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts).asm["ptx"]
    out[folder.rsplit("/", 1)[-1]] = {
        "cp_async": len(re.findall(r"cp\.async\.", ptx)),
        "acquire": len(re.findall(r"ld\.global\.acquire\.sys", ptx)),
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
    }
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(tmp_path_factory, "attention_aot", SCRIPT, ["name", "S", "heads", "causal", "perBlock"], CASES)


def test_the_grouped_waits_leave_the_kv_loop_software_pipelined(compiled):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    folders = [str(compiled / c[0]) for c in CASES]
    r = subprocess.run([sys.executable, "-c", CODE, *folders], capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0 and "ptxas" in r.stderr and "not found" in r.stderr:
        pytest.skip("no ptxas with this Triton")
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for name in got:
        assert got[name]["acquire"] > 0 and got[name]["wgmma"] > 0, (name, got)
    assert got["grouped"]["cp_async"] > 0, got
    # One wait site, before the kv loop: wait_slot's first acquire load and the one in its spin.
    assert got["grouped"]["acquire"] == 2, got
    assert got["per_block"]["acquire"] > got["grouped"]["acquire"], got
    # The causal bound clips each arrival group's range (no if on the block): pipelined too.
    assert got["grouped_causal"]["cp_async"] > 0, got
    # Two causal kv loops (off-diagonal, diagonal): two wait sites.
    assert got["grouped_causal"]["acquire"] == 4, got
