"""The runner's moe-rs kernels compile ahead of time for sm_90a (no GPU needed) at TileLink's MoE shapes,
and their PTX holds what each is for: system-scope acquire loads in the reducer's waits, a gpu-scope
release add of the ready slot in the targets kernel (the compiled producer body is ``@ovl/tlx-emitter``'s). In a process of its own: the compile needs Triton out of the
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
from ovl_runtime import language, moe_rs

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
