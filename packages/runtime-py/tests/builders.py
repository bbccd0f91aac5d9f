"""Hand-built ovl.manifest/v1 documents for the tests: AG+GEMM and GEMM+RS, any world."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any


def _arg(arg_name: str, **value: Any) -> dict[str, Any]:
    return {"name": arg_name, "value": value}


def _kernel(name: str, kind: str, params: dict[str, Any], args: list[dict[str, Any]], grid: list[Any]) -> dict[str, Any]:
    return {
        "name": name,
        "source": f"{name}.py",
        "entry": name,
        "stream": "compute",
        "grid": grid,
        "numWarps": 4,
        "numStages": 3,
        "args": args,
        "constexprs": {},
        "template": {"kind": kind, "params": params},
    }


def ag_gemm(
    world: int = 2,
    M: int = 128,
    N: int = 64,
    K: int = 32,
    BM: int = 16,
    BN: int = 32,
    split: int = 2,
    group_m: int = 2,
    dtype: str = "fp32",
    tolerance: float = 1e-4,
) -> dict[str, Any]:
    """Copy-engine push AllGather of A's row shards + a consumer GEMM waiting per chunk."""
    rpr = M // world
    assert rpr % (split * BM) == 0, "each chunk must be whole m-blocks"
    per_rank, per_chunk = rpr // BM, rpr // BM // split
    rows = rpr // split
    orders, slots, host = [], [], []
    for r in range(world):
        order = list(range(r * per_rank, (r + 1) * per_rank))
        for i in range(1, world):
            src = (r - i) % world
            order += list(range(src * per_rank, (src + 1) * per_rank))
        orders.append(order)
        slots.append([-1 if m // per_rank == r else (m // per_rank) * split + (m % per_rank) // per_chunk for m in range(M // BM)])
        ops = []
        for i in range(1, world):
            p = (r + i) % world
            for j in range(split):
                off = (r * rpr + j * rows) * K
                ops.append(
                    {
                        "kind": "copy",
                        "src": {"buffer": "A", "rank": r, "offset": off, "length": rows * K},
                        "dst": {"buffer": "A", "rank": p, "offset": off, "length": rows * K},
                        "signal": {"rank": p, "slot": r * split + j},
                    }
                )
        host.append({"rank": r, "streams": [{"name": "push", "ops": ops}]})
    params = {"M": M, "N": N, "K": K, "BLOCK_M": BM, "BLOCK_N": BN, "BLOCK_K": 16, "GROUP_M": group_m}
    args = [
        _arg("a_ptr", kind="buffer", name="A"),
        _arg("b_ptr", kind="buffer", name="B"),
        _arg("c_ptr", kind="buffer", name="C"),
        _arg("order_ptr", kind="table", name="order"),
        _arg("slot_ptr", kind="table", name="wait_slot"),
        _arg("sig_ptr", kind="buffer", name="sig"),
        _arg("err_ptr", kind="error-buffer"),
        _arg("M", kind="int", value=M),
        _arg("N", kind="int", value=N),
        _arg("K", kind="int", value=K),
        _arg("rank", kind="rank"),
        _arg("target", kind="epoch-target", arrivals=1),
        _arg("timeout_ns", kind="timeout-ns"),
    ]
    return {
        "$schema": "ovl.manifest/v1",
        "name": f"ag_gemm_w{world}",
        "world": world,
        "dtype": dtype,
        "buffers": [
            {"name": "A", "shape": [M, K], "dtype": dtype, "symmetric": True, "init": "random"},
            {"name": "B", "shape": [K, N], "dtype": dtype, "symmetric": False, "init": "random"},
            {"name": "C", "shape": [M, N], "dtype": dtype, "symmetric": False, "init": "poison"},
            {"name": "sig", "shape": [world * split], "dtype": "uint32", "symmetric": True, "init": "zeros"},
        ],
        "signals": {"buffer": "sig", "slots": world * split, "bits": 32},
        "tables": [{"name": "order", "dtype": "int32", "values": orders}, {"name": "wait_slot", "dtype": "int32", "values": slots}],
        "kernels": [
            _kernel(
                "ag_gemm_consumer", "ag-gemm-consumer", params, args, [{"kind": "num-sms", "cap": math.ceil(M / BM) * math.ceil(N / BN)}]
            )
        ],
        "hostOps": host,
        "reference": {
            "operator": "ag-gemm",
            "M": M,
            "N": N,
            "K": K,
            "inputs": {"A": "A", "B": "B"},
            "output": "C",
            "rowsPerRank": rpr,
            "tolerance": tolerance,
        },
        "timing": {"warmup": 1, "reps": 3, "checkRuns": 3},
        "waitTimeoutNs": 2_000_000_000,
    }


def gemm_rs(
    world: int = 2,
    M: int = 128,
    N: int = 64,
    K: int = 32,
    BM: int = 16,
    BN: int = 32,
    group_m: int = 2,
    dtype: str = "fp32",
    tolerance: float = 1e-4,
    chunk_blocks: int = 1,
) -> dict[str, Any]:
    """A producer GEMM notifying per tile, copy-engine sends of finished chunks (``chunk_blocks``
    m-blocks, one copy and one signal each) to their owner, rs-reduce reading its slot table
    (its own partial in place: no copy, entries -1)."""
    rpr = M // world
    assert rpr % (BM * chunk_blocks) == 0
    per_slab, blocks = rpr // BM, M // BM
    n_tiles = math.ceil(N / BN)
    done0 = world * per_slab  # tile-done slots follow the arrival slots read by rs-reduce
    orders, notify, host = [], [], []
    # rs-reduce's table: (p, mb) waits on the slot of the chunk holding mb, named by its first m-block
    arrival = [
        [-1 if p == r else p * per_slab + mb // chunk_blocks * chunk_blocks for p in range(world) for mb in range(per_slab)]
        for r in range(world)
    ]
    for r in range(world):
        order = []
        for i in range(1, world + 1):
            o = (r + i) % world
            order += list(range(o * per_slab, (o + 1) * per_slab))
        orders.append(order)
        notify.append([done0 + m for m in range(blocks)])
        streams = []
        for i in range(1, world):
            o = (r + i) % world
            ops: list[dict[str, Any]] = []
            for mb in range(0, per_slab, chunk_blocks):
                m = o * per_slab + mb
                ops += [{"kind": "wait", "slot": done0 + m + k, "arrivals": n_tiles} for k in range(chunk_blocks)]
                ops.append(
                    {
                        "kind": "copy",
                        "src": {"buffer": "C", "rank": r, "offset": m * BM * N, "length": chunk_blocks * BM * N},
                        "dst": {"buffer": "P", "rank": o, "offset": (r * rpr + mb * BM) * N, "length": chunk_blocks * BM * N},
                        "signal": {"rank": o, "slot": r * per_slab + mb},
                    }
                )
            streams.append({"name": f"to{o}", "ops": ops})
        host.append({"rank": r, "streams": streams})
    gp = {"M": M, "N": N, "K": K, "BLOCK_M": BM, "BLOCK_N": BN, "BLOCK_K": 16, "GROUP_M": group_m}
    gargs = [
        _arg("a_ptr", kind="buffer", name="A"),
        _arg("b_ptr", kind="buffer", name="B"),
        _arg("c_ptr", kind="buffer", name="C"),
        _arg("order_ptr", kind="table", name="order"),
        _arg("notify_ptr", kind="table", name="notify_slot"),
        _arg("sig_ptr", kind="buffer", name="sig"),
        _arg("M", kind="int", value=M),
        _arg("N", kind="int", value=N),
        _arg("K", kind="int", value=K),
    ]
    rp = {"WORLD": world, "BLOCK_M": BM, "BLOCK_N": BN, "N": N, "rows_per_rank": rpr}
    rargs = [
        _arg("part_ptr", kind="buffer", name="P"),
        _arg("own_ptr", kind="buffer", name="C"),
        _arg("out_ptr", kind="buffer", name="out"),
        _arg("sig_ptr", kind="buffer", name="sig"),
        _arg("slot_ptr", kind="table", name="arrival_slot"),
        _arg("err_ptr", kind="error-buffer"),
        _arg("N", kind="int", value=N),
        _arg("rank", kind="rank"),
        _arg("epoch_ptr", kind="epoch-word"),
        _arg("timeout_ns", kind="timeout-ns"),
        _arg("rows_per_rank", kind="int", value=rpr),
    ]
    slots = done0 + blocks
    return {
        "$schema": "ovl.manifest/v1",
        "name": f"gemm_rs_w{world}",
        "world": world,
        "dtype": dtype,
        "buffers": [
            {"name": "A", "shape": [M, K], "dtype": dtype, "symmetric": False, "init": "random"},
            {"name": "B", "shape": [K, N], "dtype": dtype, "symmetric": False, "init": "random"},
            {"name": "C", "shape": [M, N], "dtype": dtype, "symmetric": False, "init": "poison"},
            {"name": "P", "shape": [world, rpr, N], "dtype": dtype, "symmetric": True, "init": "poison"},
            {"name": "out", "shape": [rpr, N], "dtype": dtype, "symmetric": False, "init": "poison"},
            {"name": "sig", "shape": [slots], "dtype": "uint32", "symmetric": True, "init": "zeros"},
        ],
        "signals": {"buffer": "sig", "slots": slots, "bits": 32},
        "tables": [
            {"name": "order", "dtype": "int32", "values": orders},
            {"name": "notify_slot", "dtype": "int32", "values": notify},
            {"name": "arrival_slot", "dtype": "int32", "values": arrival},
        ],
        "kernels": [
            _kernel("gemm_producer", "gemm-producer", gp, gargs, [{"kind": "num-sms", "cap": blocks * n_tiles}]),
            _kernel("rs_reduce", "rs-reduce", rp, rargs, [per_slab, n_tiles]),
        ],
        "hostOps": host,
        "reference": {
            "operator": "gemm-rs",
            "M": M,
            "N": N,
            "K": K,
            "inputs": {"A": "A", "B": "B"},
            "output": "out",
            "rowsPerRank": rpr,
            "tolerance": tolerance,
        },
        "timing": {"warmup": 1, "reps": 3, "checkRuns": 3},
        "waitTimeoutNs": 2_000_000_000,
    }


def gemm_rs_sm(world: int = 2, M: int = 128, N: int = 64, K: int = 32, BM: int = 16, BN: int = 32) -> dict[str, Any]:
    """GEMM+RS whose deliveries are an `sm-push` kernel on the comm stream instead of host copies."""
    d = gemm_rs(world=world, M=M, N=N, K=K, BM=BM, BN=BN)
    rpr, per_slab = M // world, M // world // BM
    n_tiles, done0 = math.ceil(N / BN), world * per_slab
    segs = []
    for r in range(world):
        rows = []
        for i in range(1, world + 1):
            o = (r + i) % world
            for mb in range(per_slab):
                m = o * per_slab + mb
                rows += [m * BM * N, o, (r * rpr + mb * BM) * N, BM * N, done0 + m, n_tiles, r * per_slab + mb]
        segs.append(rows)
    d["hostOps"] = []
    d["tables"].append({"name": "push_segments", "dtype": "int64", "values": segs})
    args = [
        _arg("src_ptr", kind="buffer", name="C"),
        _arg("dst_ptrs", kind="peer-pointers", buffer="P"),
        _arg("sig_ptr", kind="buffer", name="sig"),
        _arg("sig_ptrs", kind="peer-pointers", buffer="sig"),
        _arg("seg_ptr", kind="table", name="push_segments"),
        _arg("num_segments", kind="int", value=world * per_slab),
        _arg("err_ptr", kind="error-buffer"),
        _arg("rank", kind="rank"),
        _arg("epoch_ptr", kind="epoch-word"),
        _arg("timeout_ns", kind="timeout-ns"),
    ]
    push = _kernel("sm_push", "sm-push", {"BLOCK": 1024}, args, [4])
    push["stream"], push["constexprs"] = "comm", {"BLOCK": 1024}
    d["kernels"].insert(1, push)
    d["name"] = f"gemm_rs_sm_w{world}"
    d["buffers"][3]["symmetric"] = True
    return d


def all_gather_pull(world: int = 2, M: int = 64, N: int = 48) -> dict[str, Any]:
    """AllGather by `sm-pull`: each rank stages its shard with a host copy that signals its own
    slot; every rank then pulls each shard after waiting on the owner's slot."""
    rpr = M // world
    host, segs = [], []
    for r in range(world):
        host.append(
            {
                "rank": r,
                "streams": [
                    {
                        "name": "stage",
                        "ops": [
                            {
                                "kind": "copy",
                                "src": {"buffer": "X", "rank": r, "offset": 0, "length": rpr * N},
                                "dst": {"buffer": "S", "rank": r, "offset": 0, "length": rpr * N},
                                "signal": {"rank": r, "slot": r},
                            }
                        ],
                    }
                ],
            }
        )
        rows = []
        for i in range(world):
            p = (r + i) % world
            rows += [p, 0, p * rpr * N, rpr * N, p, 1, world + p]
        segs.append(rows)
    args = [
        _arg("src_ptrs", kind="peer-pointers", buffer="S"),
        _arg("dst_ptr", kind="buffer", name="Y"),
        _arg("sig_ptr", kind="buffer", name="sig"),
        _arg("sig_ptrs", kind="peer-pointers", buffer="sig"),
        _arg("seg_ptr", kind="table", name="pull_segments"),
        _arg("num_segments", kind="int", value=world),
        _arg("err_ptr", kind="error-buffer"),
        _arg("rank", kind="rank"),
        _arg("epoch_ptr", kind="epoch-word"),
        _arg("timeout_ns", kind="timeout-ns"),
    ]
    pull = _kernel("sm_pull", "sm-pull", {"BLOCK": 1024}, args, [2])
    pull["stream"] = "comm"
    return {
        "$schema": "ovl.manifest/v1",
        "name": f"all_gather_pull_w{world}",
        "world": world,
        "dtype": "fp32",
        "buffers": [
            {"name": "X", "shape": [rpr, N], "dtype": "fp32", "symmetric": False, "init": "random"},
            {"name": "S", "shape": [rpr, N], "dtype": "fp32", "symmetric": True, "init": "poison"},
            {"name": "Y", "shape": [M, N], "dtype": "fp32", "symmetric": False, "init": "poison"},
            {"name": "sig", "shape": [2 * world], "dtype": "uint32", "symmetric": True, "init": "zeros"},
        ],
        "signals": {"buffer": "sig", "slots": 2 * world, "bits": 32},
        "tables": [{"name": "pull_segments", "dtype": "int64", "values": segs}],
        "kernels": [pull],
        "hostOps": host,
        "reference": {
            "operator": "all-gather",
            "M": M,
            "N": N,
            "K": 1,
            "inputs": {"X": "X"},
            "output": "Y",
            "rowsPerRank": rpr,
            "tolerance": 1e-6,
        },
        "timing": {"warmup": 1, "reps": 3, "checkRuns": 3},
        "waitTimeoutNs": 2_000_000_000,
    }


def reduce_scatter_ring(world: int = 3, M: int = 96, N: int = 32) -> dict[str, Any]:
    """In-place ring ReduceScatter by `ring-reduce`: chunk c starts at rank c+1 (a host copy into
    the next rank's `recv`), each hop adds the local rows and forwards, and ends reduced on rank c."""
    rpr = M // world
    ch = rpr * N
    host, segs = [], []
    for r in range(world):
        c0, nxt = (r - 1) % world, (r + 1) % world
        host.append(
            {
                "rank": r,
                "streams": [
                    {
                        "name": "start",
                        "ops": [
                            {
                                "kind": "copy",
                                "src": {"buffer": "X", "rank": r, "offset": c0 * ch, "length": ch},
                                "dst": {"buffer": "recv", "rank": nxt, "offset": c0 * ch, "length": ch},
                                "signal": {"rank": nxt, "slot": c0},
                            }
                        ],
                    }
                ],
            }
        )
        rows = []
        for h in range(1, world):
            c = (r - 1 - h) % world
            last = c == r
            rows += [c * ch, c * ch, ch, c, 1, -1 if last else nxt, c * ch, world + c if last else c]
        segs.append(rows)
    args = [
        _arg("recv_ptr", kind="buffer", name="recv"),
        _arg("acc_ptr", kind="buffer", name="X"),
        _arg("recv_ptrs", kind="peer-pointers", buffer="recv"),
        _arg("sig_ptr", kind="buffer", name="sig"),
        _arg("sig_ptrs", kind="peer-pointers", buffer="sig"),
        _arg("seg_ptr", kind="table", name="ring_segments"),
        _arg("num_segments", kind="int", value=world - 1),
        _arg("err_ptr", kind="error-buffer"),
        _arg("rank", kind="rank"),
        _arg("epoch_ptr", kind="epoch-word"),
        _arg("timeout_ns", kind="timeout-ns"),
    ]
    ring = _kernel("ring_reduce", "ring-reduce", {"BLOCK": 1024}, args, [1])
    return {
        "$schema": "ovl.manifest/v1",
        "name": f"reduce_scatter_ring_w{world}",
        "world": world,
        "dtype": "fp32",
        "buffers": [
            {"name": "X", "shape": [M, N], "dtype": "fp32", "symmetric": False, "init": "random"},
            {"name": "recv", "shape": [M, N], "dtype": "fp32", "symmetric": True, "init": "poison"},
            {"name": "sig", "shape": [2 * world], "dtype": "uint32", "symmetric": True, "init": "zeros"},
        ],
        "signals": {"buffer": "sig", "slots": 2 * world, "bits": 32},
        "tables": [{"name": "ring_segments", "dtype": "int64", "values": segs}],
        "kernels": [ring],
        "hostOps": host,
        "reference": {
            "operator": "reduce-scatter",
            "M": M,
            "N": N,
            "K": 1,
            "inputs": {"X": "X"},
            "output": "X",
            "rowsPerRank": rpr,
            "tolerance": 1e-5,
        },
        "timing": {"warmup": 1, "reps": 3, "checkRuns": 3},
        "waitTimeoutNs": 2_000_000_000,
    }


#: The built packages a node script compiles test manifests with.
EMITTER = Path(__file__).resolve().parents[2] / "tlx-emitter" / "dist" / "index.js"
PLANS = Path(__file__).resolve().parents[2] / "chunk-plan" / "dist" / "index.js"


def compile_cases(tmp_path_factory: Any, name: str, script: str, keys: list[str], cases: list[tuple[Any, ...]]) -> Path:
    """Run ``script`` (an ES module: ``argv[1]`` the emitter, ``argv[2]`` the output folder,
    ``argv[3]`` chunk-plan, ``argv[4]`` the cases as JSON objects of ``keys``) with node into a
    fresh folder ``name``; skips the test without node or the built packages."""
    import pytest

    node = shutil.which("node")
    if node is None or not EMITTER.exists() or not PLANS.exists():
        pytest.skip(f"needs node and the built {EMITTER} and {PLANS}")
    out = tmp_path_factory.mktemp(name)
    rows = [dict(zip(keys, c, strict=True)) for c in cases]
    subprocess.run(
        [node, "--input-type=module", "-e", script, EMITTER.as_uri(), str(out), PLANS.as_uri(), json.dumps(rows)],
        check=True,
        timeout=120,
    )
    return out


# Compiles every kernel of a compiled manifest for sm_90a (no GPU) and counts, per template kind,
# the PTX instructions the tests look for. Runs in a process of its own: the compile needs Triton
# out of the interpreter mode that ``conftest`` sets.
_SM90A_PTX_COUNTS = r"""
import importlib.util, json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ovl_runtime import language

assert not language.INTERPRET
folder = sys.argv[1]
m = json.load(open(f"{folder}/manifest.json"))
dtypes = {b["name"]: b["dtype"] for b in m["buffers"]}
ptr = {"bf16": "*bf16", "fp32": "*fp32", "int32": "*i32", "uint32": "*i32", "int64": "*i64"}
kinds = {"int": "i32", "rank": "i32", "table": "*i32", "epoch-word": "*i32", "error-buffer": "*i32", "timeout-ns": "i64", "peer-pointers": "*i64"}
out = {}
for k in m["kernels"]:
    spec = importlib.util.spec_from_file_location(k["name"], f"{folder}/{k['source']}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = getattr(mod, k["entry"])
    cx = dict(k["constexprs"])
    sig = {}
    for a in k["args"]:
        v = a["value"]
        if v["kind"] == "num-programs":
            cx[a["name"]] = 132
        else:
            sig[a["name"]] = ptr[dtypes[v["name"]]] if v["kind"] == "buffer" else kinds[v["kind"]]
    src = ASTSource(
        fn=fn,
        signature={n: sig.get(n, "constexpr") for n in fn.arg_names},
        constexprs={(fn.arg_names.index(c),): v for c, v in cx.items()},
    )
    opts = {"num_warps": k["numWarps"], "num_stages": k["numStages"]}
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts).asm["ptx"]
    out[k["template"]["kind"]] = {
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "release": len(re.findall(r"atom\.[a-z.]*release[a-z.]*\.add|atom\.global\.[a-z]+\.release\.add|red\.[a-z.]*release", ptx)),
        "acquire": len(re.findall(r"ld\.global\.acquire\.sys", ptx)),
        "atomics": len(re.findall(r"\batom\.|\bred\.global", ptx)),
        "setmaxnreg": len(re.findall(r"setmaxnreg", ptx)),
        "acq_rel": len(re.findall(r"atom\.[a-z.]*acq_rel[a-z.]*\.add", ptx)),
        "cg_loads": len(re.findall(r"ld\.global\.cg", ptx)),
    }
print(json.dumps(out))
"""


def sm90a_ptx_counts(folder: Path) -> dict[str, dict[str, int]]:
    """Per template kind of the manifest in ``folder``: wgmma, release / acquire / acq_rel atomics,
    all atomics, setmaxnreg and L2-only (``.cg``) loads in its sm_90a PTX. Skips without ptxas."""
    import os
    import sys

    import pytest

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    r = subprocess.run([sys.executable, "-c", _SM90A_PTX_COUNTS, str(folder)], capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0 and "ptxas" in r.stderr and "not found" in r.stderr:
        pytest.skip("no ptxas with this Triton")
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


#: The built ``ovl`` CLI, which the torch API's tests compile kernels on demand with.
CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"


def compile_on_demand(monkeypatch: Any, cache: Path) -> None:
    """Make the torch API compile every kernel it needs with the built CLI into ``cache`` (no library searched first,
    the compiler's default target)."""
    monkeypatch.setenv("OVL_CLI", f"node {CLI}")
    monkeypatch.setenv("OVL_CACHE_DIR", str(cache))
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.delenv("OVL_TARGET", raising=False)
