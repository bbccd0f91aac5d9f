"""The runner's moe-rs kernels compile ahead of time for sm_90a (no GPU needed) at TileLink's MoE shapes,
and their PTX holds what each is for: system-scope acquire loads in the reducer's waits, a gpu-scope
release add of the ready slot in the targets kernel; and every kernel of a compiled moe-rs manifest at
MoE-1 (world 8) compiles, the transformed producer with tensor-core MMAs and its inserted release adds. In a process of its own: the compile needs Triton out of the
interpreter mode that ``conftest`` sets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CODE = r"""
import re
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ovl_runtime import language
from ovl_runtime.operators.moe_rs import kernels as moe_rs

assert not language.INTERPRET
TARGET = GPUTarget("cuda", 90, 32)


def ptx_of(fn, sig, cx, warps=4, stages=3):
    src = ASTSource(
        fn=fn,
        signature={**sig, **{k: "constexpr" for k in cx}},
        constexprs={(fn.arg_names.index(k),): v for k, v in cx.items()},
    )
    return triton.compile(src, target=TARGET, options={"num_warps": warps, "num_stages": stages}).asm["ptx"]


i32 = "i32"
reducer = ptx_of(
    moe_rs.moe_topk_reduce_rs,
    {"partial_ptrs": "*i64", "like_ptr": "*bf16", "out_ptr": "*bf16", "sig_ptr": "*i32", "expect_ptr": "*i32", "err_ptr": "*i32",
     "rank": i32, "epoch_ptr": "*i32", "timeout_ns": "i64", "N": i32, "SLAB_T": i32, "SLABS_PER_RANK": i32, "READY_SLOT": i32},
    {"TOP_K": 5, "WORLD": 8, "BLOCK_T": 32, "BLOCK_N": 128, "NUM_PROGRAMS": 4},
)
assert re.search(r"ld\.global\.acquire\.sys", reducer), "no acquire load in the reducer's wait"
expect = ptx_of(
    moe_rs.moe_slab_expect,
    {"sorted_ids": "*i32", "num_blocks_ptr": "*i32", "expect_ptr": "*i32", "sig_ptr": "*i32", "READY_SLOT": i32, "SLOTS": i32,
     "NOTIFIES": i32, "SLAB_T": i32, "NUM_SLABS": i32},
    {"TOP_K": 5, "BLOCK_M": 64, "SLABS_P2": 64, "STEP": 16},
)
assert ".entry moe_slab_expect" in expect
assert re.search(r"atom\.global\.gpu\.release\.add|atom\.release\.gpu\.global\.add|red\.release\.gpu\.global\.add", expect), "no gpu-scope release add of READY"
print("ok")
"""


def test_the_moe_rs_kernels_compile_for_sm90a():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0 and "ptxas" in r.stderr and "not found" in r.stderr:
        pytest.skip("no ptxas with this Triton")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


SCRIPT = """
const ovl = await import(process.argv[1]);
const { reduceScatterDirect, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const plan = planSignals(reduceScatterDirect({
    tensor: { name: "moe_out", shape: [c.T * c.k, c.H], dtype: "bf16" }, src: "moe_partial", axis: 0,
    mesh: [c.world], split: 2, afterCompute: true,
  }));
  const r = await ovl.compile({
    name: c.name, kind: "moe-rs", plan, body: ovl.builtinBody(c.body),
    problem: { M: c.T, N: c.H, K: c.I }, tile: { BM: c.tile[0], BN: c.tile[1], BK: 64 },
    moe: { experts: c.E, topk: c.k }, options: { dtype: "bf16" },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""


def _compiled_kernels(tmp_path_factory, name: str, body: str, tile: tuple[int, int]) -> dict:
    import builders

    # TileLink's MoE-1 at world 8: T = 8192 tokens, H = 2048, I/W = 192, 8 experts, top-2.
    cases = [("moe1_w8", 8, 8192, 2048, 192, 8, 2, body, tile)]
    compiled = builders.compile_cases(tmp_path_factory, name, SCRIPT, ["name", "world", "T", "H", "I", "E", "k", "body", "tile"], cases)
    return builders.sm90a_ptx_counts(compiled / "moe1_w8")


def test_every_kernel_of_a_compiled_moe_rs_manifest_compiles_for_sm90a(tmp_path_factory):
    got = _compiled_kernels(tmp_path_factory, "moe_rs_aot", "moe_gemm_scatter", (64, 128))
    assert set(got) == {"moe-align-count", "moe-align-scatter", "moe-slab-expect", "local-producer", "moe-topk-reduce-rs"}, got
    assert got["local-producer"]["wgmma"] > 0 and got["local-producer"]["release"] > 0, got  # the inserted notifies
    assert got["moe-slab-expect"]["release"] > 0, got  # the READY slot
    assert got["moe-topk-reduce-rs"]["acquire"] > 0, got  # the bounded waits


def test_the_warp_specialised_moe_rs_body_compiles_split_and_without_atomics(tmp_path_factory):
    """The default body at its default tile: Triton warp-specialises its tile loop (register reallocation
    between the partitions), the kernel holds no atomic (nothing inserted into the loop), and the launch
    notify after it release-adds at system scope."""
    got = _compiled_kernels(tmp_path_factory, "moe_rs_ws_aot", "moe_gemm_scatter_ws", (128, 256))
    assert set(got) == {
        "moe-align-count", "moe-align-scatter", "moe-permute-rows", "moe-slab-expect", "local-producer", "moe-topk-sum",
        "moe-slab-notify", "moe-topk-reduce-rs",
    }, got  # fmt: skip
    p = got["local-producer"]
    assert p["wgmma"] > 0 and p["setmaxnreg"] > 0 and p["atomics"] == 0, got
    assert got["moe-slab-notify"]["release"] > 0, got
