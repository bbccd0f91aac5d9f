"""The interpreter emulation: the emitted kernels' own source run by Triton's CPU interpreter.

Real manifests come from the built ``@ovl/tlx-emitter`` (``pnpm --filter @ovl/tlx-emitter
build``) at a tiny shape (2 ranks, M=128, N=64, K=64, 32×32×32 tiles); each run fills fresh
random inputs, poisons the outputs and checks against the numpy reference. Needs torch and
triton (the ``interpret`` extra); skipped without them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import builders
import pytest

from ovl_runtime import WaitTimeout, emulate, load_manifest
from ovl_runtime._emulate.engine import choose_engine
from ovl_runtime._emulate.interpret_load import interpret_unavailable

pytestmark = pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))

EMITTER = Path(__file__).resolve().parents[2] / "tlx-emitter" / "dist" / "index.js"

SCRIPT = """
const { exampleManifests, emitManifestJson, smPullSource, ringReduceSource } = await import(process.argv[1]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
const res = exampleManifests({ world: 2, M: 128, N: 64, K: 64, split: 2, tile: { BM: 32, BN: 32, BK: 32 } });
for (const [name, r] of Object.entries(res)) {
  const dir = join(out, name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), emitManifestJson(r.manifest));
}
const sm = join(out, "sm");
mkdirSync(sm, { recursive: true });
writeFileSync(join(sm, "sm_pull.py"), smPullSource({ BLOCK: 1024 }, { dtype: "fp32" }));
writeFileSync(join(sm, "ring_reduce.py"), ringReduceSource({ BLOCK: 1024 }, { dtype: "fp32" }));
"""

EXAMPLES = ["ag_gemm_swizzle", "ag_gemm_ring", "gemm_rs_ce", "gemm_rs_sm"]


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    node = shutil.which("node")
    if node is None or not EMITTER.exists():
        pytest.skip(f"needs node and {EMITTER} (built by the @ovl/tlx-emitter build)")
    out = tmp_path_factory.mktemp("emitted")
    subprocess.run([node, "--input-type=module", "-e", SCRIPT, EMITTER.as_uri(), str(out)], check=True, timeout=120)
    return out


def _manifest_json(emitted: Path, name: str) -> dict:
    return json.loads((emitted / name / "manifest.json").read_text())


def _write(dir_: Path, name: str, d: dict) -> Path:
    p = dir_ / f"{name}.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("name", EXAMPLES)
def test_emitted_examples_are_correct_under_the_interpreter(emitted, name):
    m = load_manifest(emitted / name / "manifest.json")
    assert choose_engine(m) == "numpy"  # their templates have numpy twins; asked for explicitly here
    t0 = time.monotonic()
    out = emulate(m, epochs=2, seed=3, engine="interpret", timeout_s=10)
    assert out.failures == [] and out.ok, out.failures
    assert len(out.checks) == 2 and out.device == "cpu-interpreter"
    # bf16 outputs (the numpy engine computes in float32): a few 1e-3, far below a wrong tile.
    assert all(0 <= c.max_rel_error < 2e-2 for c in out.checks)
    assert time.monotonic() - t0 < 30


def test_a_kernel_without_a_numpy_template_runs_under_the_interpreter(emitted, tmp_path):
    d = _manifest_json(emitted, "ag_gemm_swizzle")
    d["kernels"][0]["template"]["kind"] = "user-transformed-gemm"
    shutil.copy(emitted / "ag_gemm_swizzle" / "ag_gemm_consumer.py", tmp_path)
    m = load_manifest(_write(tmp_path, "user", d))
    assert choose_engine(m) == "interpret"
    out = emulate(m, epochs=1, seed=5)
    assert out.ok and out.device == "cpu-interpreter", out.failures


def test_a_slot_never_notified_is_a_wait_timeout_naming_rank_and_slot(emulated_timeout):
    exc, elapsed = emulated_timeout
    assert isinstance(exc, WaitTimeout)
    # rank 0's copy of its chunk 1 into rank 1 no longer signals: rank 1 waits on slot 0*2+1.
    assert (exc.rank, exc.slot, exc.seen, exc.expected) == (1, 1, 0, 1)
    assert "rank 1" in str(exc) and "slot 1" in str(exc)
    assert elapsed < 10  # one wait bound (1 s), not one per tile, and no hang


@pytest.fixture
def emulated_timeout(emitted, tmp_path):
    d = _manifest_json(emitted, "ag_gemm_swizzle")
    ops = next(h for h in d["hostOps"] if h["rank"] == 0)["streams"][0]["ops"]
    victim = next(op for op in ops if op.get("signal") == {"rank": 1, "slot": 1})
    del victim["signal"]
    shutil.copy(emitted / "ag_gemm_swizzle" / "ag_gemm_consumer.py", tmp_path)
    m = load_manifest(_write(tmp_path, "silent", d))
    t0 = time.monotonic()
    out = emulate(m, epochs=1, engine="interpret", timeout_s=1.0)
    assert not out.ok and len(out.failures) >= 1
    return out.failures[0], time.monotonic() - t0


def test_a_host_wait_never_satisfied_times_out_naming_rank_and_slot(emitted, tmp_path):
    d = _manifest_json(emitted, "gemm_rs_ce")
    ops = next(h for h in d["hostOps"] if h["rank"] == 1)["streams"][0]["ops"]
    wait = next(op for op in ops if op["kind"] == "wait")
    wait["arrivals"] += 5  # more tile notifies than the GEMM makes
    for f in ("gemm_producer.py", "rs_reduce.py"):
        shutil.copy(emitted / "gemm_rs_ce" / f, tmp_path)
    out = emulate(load_manifest(_write(tmp_path, "greedy", d)), epochs=1, engine="interpret", timeout_s=1.0)
    assert not out.ok
    exc = out.failures[0]
    assert isinstance(exc, WaitTimeout) and (exc.rank, exc.slot) == (1, wait["slot"]) and exc.expected == wait["arrivals"]
    assert "host stream" in str(exc)


@pytest.mark.parametrize("build", [builders.all_gather_pull, builders.reduce_scatter_ring])
def test_sm_pull_and_ring_reduce_move_data_through_peer_pointer_tables(emitted, tmp_path, build):
    d = build()
    for k in d["kernels"]:
        shutil.copy(emitted / "sm" / k["source"], tmp_path)
        k["constexprs"] = {"BLOCK": 1024}
    out = emulate(load_manifest(_write(tmp_path, d["name"], d)), epochs=2, seed=7, engine="interpret", timeout_s=10)
    assert out.ok and all(c.max_rel_error < 1e-6 for c in out.checks), out.failures


def test_the_cli_takes_the_engine(emitted, tmp_path, capsys):
    from ovl_runtime._cli.main import main

    report = tmp_path / "r.json"
    code = main(["run", str(emitted / "gemm_rs_sm" / "manifest.json"), "--emulate=interpret", "--epochs", "1", "--out", str(report)])
    assert code == 0
    r = json.loads(report.read_text())
    assert r["ok"] and r["mode"] == "emulate" and r["device"] == "cpu-interpreter"
    with pytest.raises(SystemExit):
        main(["run", str(emitted / "gemm_rs_sm" / "manifest.json"), "--emulate=bogus"])


def test_unknown_engines_are_usage_errors(emitted):
    from ovl_runtime import UsageError

    m = load_manifest(emitted / "gemm_rs_ce" / "manifest.json")
    with pytest.raises(UsageError):
        emulate(m, engine="cuda")


KERNELS = """
import triton
import triton.language as tl
from ovl_runtime.language import notify_slot, wait_slot


@triton.jit
def slow(out_ptr, sig_ptr, err_ptr):
    pid = tl.program_id(0)
    if pid == 0:
        wait_slot(sig_ptr, 0, 1, err_ptr, 0, 5_000_000_000)
    tl.store(out_ptr + pid * 2, pid)
    tl.store(out_ptr + pid * 2 + 1, tl.num_programs(0))


@triton.jit
def fast(out_ptr, sig_ptr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid * 2, pid)
    tl.store(out_ptr + pid * 2 + 1, tl.num_programs(0))
    if pid == tl.num_programs(0) - 1:
        notify_slot(sig_ptr, 0)
"""


def test_concurrent_launches_see_their_own_program_ids(tmp_path):
    import sys

    import torch

    from ovl_runtime._emulate.interpret_load import interpreter_mode
    from ovl_runtime._emulate.interpret_patch import patched

    interpreter_mode()
    (tmp_path / "two_kernels.py").write_text(KERNELS)
    sys.path.insert(0, str(tmp_path))
    try:
        import two_kernels
    finally:
        sys.path.remove(str(tmp_path))
    a, b = torch.full((6,), -1, dtype=torch.int32), torch.full((10,), -1, dtype=torch.int32)
    sig, err = torch.zeros(1, dtype=torch.int32), torch.zeros(8, dtype=torch.int32)
    with patched():
        # `slow` (3 programs) waits in program 0 until `fast` (5 programs, another thread) has run.
        t = threading.Thread(target=lambda: two_kernels.slow[(3,)](a, sig, err))
        t.start()
        time.sleep(0.2)
        two_kernels.fast[(5,)](b, sig)
        t.join(10)
    assert err.tolist()[0] == 0
    assert a.tolist() == [0, 3, 1, 3, 2, 3]
    assert b.tolist() == [0, 5, 1, 5, 2, 5, 3, 5, 4, 5]
    assert int(sig[0]) == 1
