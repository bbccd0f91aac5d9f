"""The ``nvshmem`` transfer backend on the CPU: manifests from ``ovl emit ... --backend nvshmem`` emulated in both
engines over several epochs (the numpy ``nvshmem-push`` template; the emitted source under Triton's interpreter
with ``put_signal_add`` patched to the emulated world), a lost signal timing out with its rank and slot, the
manifest checks of NVSHMEM rows, how a process selects PyTorch's NVSHMEM backend (and refuses when it is too
late), the one-GPU mode's refusal, and the device module against the emitter, PyTorch and NVSHMEM's headers.
What needs GPUs (NVSHMEM bootstrapping, real puts) is not run here: see tests_gpu and the runtime README."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ovl_runtime import emulate, load_manifest, parse_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime._runner import env as runner_env
from ovl_runtime._runner.nvshmem import peer_view_need
from ovl_runtime.errors import ManifestError, UsageError, WaitTimeout

ROOT = Path(__file__).resolve().parents[3]
CLI = ROOT / "packages" / "cli" / "dist" / "bin.js"
NVSHMEM_TS = ROOT / "packages" / "tlx-emitter" / "src" / "backends" / "triton" / "kernels" / "nvshmem-comm.ts"
nvshmem_np = importlib.import_module("ovl_runtime._emulate.nvshmem")
needs_interpreter = pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))

# name: (operator, world, M, extra flags)
CASES = {
    "ag_w2": ("ag-gemm", 2, 128, []),
    "ag_w4": ("ag-gemm", 4, 256, []),
    # A ring forwards what it receives. Triton's interpreter runs a launch's programs one after another, so a
    # program waiting on a peer's put must not wait behind another program of that peer: one program here
    # (on a GPU every program of the push kernel runs at once, on the SMs the GEMM leaves it).
    "ag_ring_w4": ("ag-gemm", 4, 256, ["--template", "ring", "--comm-sms", "1"]),
    # Hierarchical (2 nodes x 2 GPUs, 2 x 4): over NVSHMEM the rail's shards cross the network first, then each
    # rank relays what arrived to its node peers, a put waiting on the arrival's slot (one program, as the ring).
    "ag_hier_2x2": ("ag-gemm", 4, 256, ["--mesh", "2x2", "--template", "hierarchical", "--comm-sms", "1"]),
    "ag_hier_2x4": ("ag-gemm", 8, 512, ["--mesh", "2x4", "--template", "hierarchical", "--comm-sms", "1"]),
    "rs_w2": ("gemm-rs", 2, 128, []),
    "rs_w4": ("gemm-rs", 4, 256, []),
    # Hierarchical GEMM+RS: node peers' partials put inside the node, summed per rail (slab-sum), the node sums put
    # over the rail and summed per slab: two nvshmem-push kernels, two slab-sums.
    "rs_hier_2x2": ("gemm-rs", 4, 256, ["--mesh", "2x2", "--template", "hierarchical"]),
    "rs_hier_2x4": ("gemm-rs", 8, 512, ["--mesh", "2x4", "--template", "hierarchical"]),
    # The partitioned GEMM+AllReduce: the slab pushes of GEMM+RS, ar-reduce into the rank's rows of ar_out, then a
    # second nvshmem-push kernel putting each reduced m-block to every peer's ar_out, counted by ar_done.
    "ar_w2": ("gemm-ar", 2, 128, []),
    "ar_w4": ("gemm-ar", 4, 256, []),
}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    node = shutil.which("node")
    if node is None or not CLI.exists():
        pytest.skip(f"needs node and the built {CLI}")
    out = tmp_path_factory.mktemp("nvshmem")
    for name, (op, world, m, extra) in CASES.items():
        argv = [node, str(CLI), "emit", op, "--m", str(m), "--n", "64", "--k", "64", "--world", str(world), "--split", "2"]
        argv += ["--tile", "32x32x32", "--backend", "nvshmem", "--out", str(out / name), *extra]
        subprocess.run(argv, check=True, capture_output=True, timeout=120)
    return out


def _manifest(emitted: Path, name: str) -> dict:
    return json.loads((emitted / name / "manifest.json").read_text())


def _copy(emitted: Path, name: str, to: Path, d: dict) -> Path:
    for f in (emitted / name).glob("*.py"):
        shutil.copy(f, to)
    p = to / "manifest.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("name", list(CASES))
def test_nvshmem_manifests_are_correct_over_three_epochs_in_the_numpy_engine(emitted, name):
    m = load_manifest(emitted / name / "manifest.json")
    # The hierarchical GEMM+RS: one push kernel per stage; GEMM+AllReduce: the slab pushes, then the reduced slabs.
    pushes = 2 if name.startswith(("rs_hier", "ar_")) else 1
    assert m.requires_nvshmem and [k.template_kind for k in m.kernels if k.requires] == ["nvshmem-push"] * pushes
    assert all(not s.ops for h in m.host_ops for s in h.streams) and peer_view_need(m) is None
    out = emulate(m, epochs=3, seed=7, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 3 and all(c.ok for c in out.checks)


@needs_interpreter
@pytest.mark.parametrize("name", list(CASES))
def test_nvshmem_manifests_are_correct_over_three_epochs_running_their_own_source(emitted, name):
    out = emulate(load_manifest(emitted / name / "manifest.json"), epochs=3, seed=11, engine="interpret")
    out.raise_for_failure()
    assert out.device == "cpu-interpreter" and len(out.checks) == 3 and all(c.ok for c in out.checks)


def _victim(d: dict) -> tuple[int, int]:
    """The (PE, slot) of rank 0's first put that signals."""
    n = 7
    flat = next(t for t in d["tables"] if t["name"] == "push_segments")["values"][0]
    row = next(flat[i : i + n] for i in range(0, len(flat), n) if flat[i + 6] >= 0)
    return row[1], row[6]


def test_a_lost_signal_is_a_wait_timeout_naming_rank_and_slot_in_the_numpy_engine(emitted, monkeypatch):
    d = _manifest(emitted, "rs_w2")
    pe, slot = _victim(d)
    add = nvshmem_np.signal_add

    def lossy(ctx, board, s):
        if (board.rank, s) != (pe, slot):
            add(ctx, board, s)

    monkeypatch.setattr(nvshmem_np, "signal_add", lossy)
    out = emulate(parse_manifest(d), epochs=1, engine="numpy", timeout_s=1.0)
    assert not out.ok
    exc = out.failures[0]
    assert isinstance(exc, WaitTimeout) and (exc.rank, exc.slot, exc.seen, exc.expected) == (pe, slot, 0, 1)
    assert f"rank {pe}" in str(exc) and f"slot {slot}" in str(exc)


def _rows(d: dict, rank: int) -> list[list[int]]:
    flat = next(t for t in d["tables"] if t["name"] == "push_segments")["values"][rank]
    return [flat[i : i + 7] for i in range(0, len(flat), 7)]


def test_a_hierarchical_relay_waits_bounded_on_the_chunk_it_forwards(emitted, monkeypatch):
    """2 x 2: rank 0's network put lands on rank 2, which relays it to rank 3 after waiting on its slot. The put's
    signal lost, rank 2's relay (and its consumer) time out naming rank 2 and that slot: nothing is forwarded unseen."""
    d = _manifest(emitted, "ag_hier_2x2")
    network = [r for r in _rows(d, 0) if r[6] >= 0 and r[1] // 2 != 0]
    assert [r[1] for r in network] == [2, 2] and all(r[4] == -1 for r in network)
    pe, slot = network[0][1], network[0][6]
    relays = [r for r in _rows(d, pe) if r[4] == slot]
    assert [r[1] for r in relays] == [3] and relays[0][0] == network[0][2]  # forwards the chunk that landed
    add = nvshmem_np.signal_add

    def lossy(ctx, board, s):
        if (board.rank, s) != (pe, slot):
            add(ctx, board, s)

    monkeypatch.setattr(nvshmem_np, "signal_add", lossy)
    out = emulate(parse_manifest(d), epochs=1, engine="numpy", timeout_s=1.0)
    assert not out.ok
    lost = [e for e in out.failures if isinstance(e, WaitTimeout) and (e.rank, e.slot) == (pe, slot)]
    assert lost and (lost[0].seen, lost[0].expected) == (0, 1) and f"slot {slot}" in str(lost[0])


def test_a_lost_node_sum_is_a_wait_timeout_of_the_slab_sum_naming_rank_and_slot(emitted, monkeypatch):
    """2 x 2 GEMM+RS: rank 0 puts its node's sum of rank 2's shard over the network (net_segments); that signal lost,
    rank 2's final slab-sum waits on it, bounded, and names rank 2 and the slot; every other sum completes."""
    d = _manifest(emitted, "rs_hier_2x2")
    net = next(t for t in d["tables"] if t["name"] == "net_segments")["values"][0]
    rows = [net[i : i + 7] for i in range(0, len(net), 7) if net[i + 6] >= 0]
    assert {r[1] for r in rows} == {2} and all(r[4] >= 0 for r in rows)  # over the rail, each after its node sum
    pe, slot = rows[0][1], rows[0][6]
    final = next(t for t in d["tables"] if t["name"] == "net_arrival_slot")["values"][pe]
    assert slot in final
    add = nvshmem_np.signal_add

    def lossy(ctx, board, s):
        if (board.rank, s) != (pe, slot):
            add(ctx, board, s)

    monkeypatch.setattr(nvshmem_np, "signal_add", lossy)
    out = emulate(parse_manifest(d), epochs=1, engine="numpy", timeout_s=1.0)
    assert not out.ok
    lost = [e for e in out.failures if isinstance(e, WaitTimeout) and (e.rank, e.slot) == (pe, slot)]
    assert lost and (lost[0].seen, lost[0].expected) == (0, 1) and "slab-sum" in str(lost[0])


def test_a_lost_reduced_slab_put_is_a_wait_timeout_of_ar_done_naming_rank_and_slot(emitted, monkeypatch):
    """World-2 GEMM+AllReduce: rank 0 puts each reduced m-block of its slab to rank 1 (ar_segments), each after
    ar-reduce's done slot of the m-block; one signal lost, rank 1's ar_done waits on it, bounded, and names rank 1 and
    the slot (one of B arrivals missing)."""
    d = _manifest(emitted, "ar_w2")
    flat = next(t for t in d["tables"] if t["name"] == "ar_segments")["values"][0]
    rows = [flat[i : i + 7] for i in range(0, len(flat), 7) if flat[i + 6] >= 0]
    assert {r[1] for r in rows} == {1} and all(r[4] >= 0 and r[5] >= 1 for r in rows)  # to the peer, after the reduction
    pe, slot = rows[0][1], rows[0][6]
    waits = next(t for t in d["tables"] if t["name"] == "ar_done_slots")["values"][pe]
    assert [slot, len(rows)] == waits[:2]
    add = nvshmem_np.signal_add
    lost = []

    def lossy(ctx, board, s):
        if (board.rank, s) == (pe, slot) and not lost:
            lost.append(s)
            return
        add(ctx, board, s)

    monkeypatch.setattr(nvshmem_np, "signal_add", lossy)
    out = emulate(parse_manifest(d), epochs=1, engine="numpy", timeout_s=1.0)
    assert not out.ok
    got = [e for e in out.failures if isinstance(e, WaitTimeout) and (e.rank, e.slot) == (pe, slot)]
    assert got and (got[0].seen, got[0].expected) == (len(rows) - 1, len(rows)) and f"slot {slot}" in str(got[0])


@needs_interpreter
def test_a_lost_put_is_a_wait_timeout_naming_rank_and_slot_under_the_interpreter(emitted, tmp_path, monkeypatch):
    from ovl_runtime._emulate import interpret_nvshmem

    d = _manifest(emitted, "ag_w2")
    pe, slot = _victim(d)
    heap_put = interpret_nvshmem.InterpretedHeap.put_signal_add
    lost = []

    def lossy(self, dst, src, nbytes, sig, to):
        # Rank 0 names the PE's signal word by its own symmetric address of slot ``slot``.
        if to == pe and sig == self.spans[self.signal_buffer][0][0] + 4 * slot:
            lost.append(to)
            return
        heap_put(self, dst, src, nbytes, sig, to)

    monkeypatch.setattr(interpret_nvshmem.InterpretedHeap, "put_signal_add", lossy)
    out = emulate(load_manifest(_copy(emitted, "ag_w2", tmp_path, d)), epochs=1, engine="interpret", timeout_s=1.0)
    assert lost and not out.ok
    exc = out.failures[0]
    assert isinstance(exc, WaitTimeout) and (exc.rank, exc.slot, exc.seen, exc.expected) == (pe, slot, 0, 1)


def _rows_of(d: dict) -> list[int]:
    return next(t for t in d["tables"] if t["name"] == "push_segments")["values"][0]


@pytest.mark.parametrize(
    "corrupt,match",
    [
        (lambda d: _rows_of(d).__setitem__(6, _rows_of(d)[6] + 1), "not the low half of a 64-bit signal word"),
        (lambda d: _rows_of(d).__setitem__(6, -1), "signals no slot"),
        (lambda d: _rows_of(d).__setitem__(1, 9), "outside the world"),
        (lambda d: _rows_of(d).__setitem__(2, 1 << 40), "outside buffer"),
        (lambda d: next(k for k in d["kernels"] if k["name"] == "nvshmem_push").pop("requires"), "must list 'nvshmem'"),
        (lambda d: next(b for b in d["buffers"] if b["name"] == "C_partial").__setitem__("symmetric", False), "symmetric"),
    ],
)
def test_the_manifest_checks_refuse_rows_nvshmem_would_misplace(emitted, corrupt, match):
    d = _manifest(emitted, "rs_w2")
    corrupt(d)
    with pytest.raises(ManifestError, match=match):
        parse_manifest(d)


def test_auto_selects_nvshmem_for_a_manifest_that_puts_through_it_and_refuses_cuda(emitted):
    nv = load_manifest(emitted / "ag_w2" / "manifest.json")
    d = _manifest(emitted, "ag_w2")
    d["kernels"] = [k for k in d["kernels"] if k["name"] != "nvshmem_push"]
    d["tables"] = [t for t in d["tables"] if t["name"] != "push_segments"]
    plain = parse_manifest(d)
    assert runner_env.symm_backend_for([nv]) == "nvshmem" and runner_env.symm_backend_for([plain]) == "cuda"
    assert runner_env.symm_backend_for([plain, nv], "nvshmem") == "nvshmem"
    with pytest.raises(UsageError, match=r"ag_gemm.* through NVSHMEM.*drop --symm-backend cuda"):
        runner_env.symm_backend_for([plain, nv], "cuda")


def test_selecting_nvshmem_after_torch_was_imported_is_refused(monkeypatch):
    import torch  # noqa: F401 - the test is that torch is already in this process

    monkeypatch.setenv("TORCH_SYMMMEM", "CUDA")
    with pytest.raises(UsageError, match="torch was imported in this process with TORCH_SYMMMEM=CUDA"):
        runner_env.select_symm_backend("nvshmem")
    assert os.environ["TORCH_SYMMMEM"] == "CUDA"
    runner_env.select_symm_backend("cuda")  # what torch already has: fine
    monkeypatch.delenv("TORCH_SYMMMEM")
    runner_env.select_symm_backend("cuda")  # unset is CUDA
    assert {k: os.environ[k] for k in runner_env.SAFE_ENV} == runner_env.SAFE_ENV


def test_a_fresh_process_selects_nvshmem_before_torch():
    code = (
        "import sys; from ovl_runtime._runner.env import select_symm_backend; select_symm_backend('nvshmem'); "
        "import os; assert 'torch' not in sys.modules; print(os.environ['TORCH_SYMMMEM'], os.environ['NVSHMEM_DISABLE_NVLS'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "TORCH_SYMMMEM"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=True)
    assert r.stdout.split() == ["NVSHMEM", "1"]


def test_the_cli_refuses_symm_backend_cuda_for_an_nvshmem_manifest(emitted, capsys):
    from ovl_runtime._cli.main import main

    assert main(["run", str(emitted / "ag_w2" / "manifest.json"), "--symm-backend", "cuda"]) == 2
    assert "drop --symm-backend cuda" in capsys.readouterr().err


def test_the_one_gpu_mode_refuses_nvshmem_manifests_by_name(emitted):
    from ovl_runtime._runner import onegpu

    m = load_manifest(emitted / "rs_w2" / "manifest.json")
    with pytest.raises(
        UsageError, match=rf"{m.name} puts through NVSHMEM.*torchrun --nproc_per_node=2.*CUDA_VISIBLE_DEVICES=0.*nvshmem4py"
    ):
        onegpu._run_one(m, 132, 1, 0, None, lambda _e: None)


def test_manifests_needing_peer_views_are_named(emitted):
    d = _manifest(emitted, "rs_w2")
    k = next(k for k in d["kernels"] if k["name"] == "rs_reduce")
    k["args"].append({"name": "x", "value": {"kind": "peer-pointers", "buffer": "partials"}})
    assert "peer pointers" in (peer_view_need(parse_manifest(d)) or "")


def test_the_device_module_matches_the_emitter_pytorch_and_nvshmem():
    src = (Path(__file__).resolve().parents[1] / "src" / "ovl_runtime" / "nvshmem.py").read_text()
    names = next(
        ast.literal_eval(n.value)
        for n in ast.parse(src).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "DEVICE_FUNCTIONS"
    )
    ts = NVSHMEM_TS.read_text()
    emitter = re.search(r"NVSHMEM_FUNCTIONS = \[([^\]]*)\]", ts)
    assert emitter is not None and tuple(re.findall(r'"(\w+)"', emitter.group(1))) == names
    assert "import torch" not in src  # importable for the emulation and the AOT check without torch
    from ovl_runtime import nvshmem

    torch_src = Path(sysconfig.get_path("purelib")) / "torch" / "distributed" / "_symmetric_memory" / "_nvshmem_triton.py"
    if torch_src.exists():  # PyTorch's wrapper of the same device function: symbol and argument types
        text = torch_src.read_text()
        at = text.index(f'("{nvshmem.PUT_SIGNAL_SYMBOL}"')
        types = re.findall(r'core\.dtype\("(\w+)"\)', text[text.rindex("{", 0, at) : at])
        assert types == ["int64", "int64", "int64", "int64", "uint64", "int32", "int32"]
    header = Path(sysconfig.get_path("purelib")) / "nvidia" / "nvshmem" / "include" / "device_host_transport" / "nvshmem_common_transport.h"
    if not header.exists():
        pytest.skip(f"no NVSHMEM headers at {header}")
    found = re.search(r"NVSHMEM_SIGNAL_ADD = (\d+)", header.read_text())
    assert found is not None and int(found.group(1)) == nvshmem.NVSHMEM_SIGNAL_ADD


# Compiles the emitted nvshmem-push kernel for sm_90a with NVSHMEM's device bitcode linked (no GPU), in a process
# of its own (conftest puts this one in interpreter mode).
_AOT = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
k = __import__(sys.argv[3])
sig = {"src_ptr": "*bf16", "dst_ptr": "*bf16", "sig_ptr": "*i32", "seg_ptr": "*i64", "num_segments": "i32", "err_ptr": "*i32",
       "rank": "i32", "epoch_ptr": "*i32", "timeout_ns": "i64"}
c = triton.compile(ASTSource(k.nvshmem_push, signature=sig, constexprs={}), target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": 8, "num_stages": 1, "extern_libs": (("libnvshmem_device", sys.argv[2]),)})
ptx = c.asm["ptx"]
print(json.dumps({"put_signal": len(re.findall(r"nvshmemi_transfer_put_signal", ptx)), "acquire": len(re.findall(r"ld\.global\.acquire\.sys", ptx)),
                  "cubin": len(c.asm["cubin"])}))
"""


@pytest.mark.parametrize("name", ["rs_w2", "ag_hier_2x2", "rs_hier_2x2", "ar_w2"])
def test_the_nvshmem_kernel_compiles_for_sm90a_with_nvshmems_device_library(emitted, name):
    bc = Path(sysconfig.get_path("purelib")) / "nvidia" / "nvshmem" / "lib" / "libnvshmem_device.bc"
    if not bc.exists():
        pytest.skip(f"no NVSHMEM device bitcode at {bc} (the nvidia-nvshmem-cu13 wheel PyTorch installs)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    # Every nvshmem-push kernel of the manifest (GEMM+AllReduce's second one puts the reduced slabs), by its file.
    for module in sorted({k["name"] for k in _manifest(emitted, name)["kernels"] if k.get("requires")}):
        argv = [sys.executable, "-c", _AOT, str(emitted / name), str(bc), module]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
        if r.returncode != 0 and "ptxas" in r.stderr and "not found" in r.stderr:
            pytest.skip("no ptxas with this Triton")
        assert r.returncode == 0, r.stderr[-3000:]
        got = json.loads(r.stdout.strip().splitlines()[-1])
        assert got["put_signal"] >= 1 and got["acquire"] >= 1 and got["cubin"] > 0, module
