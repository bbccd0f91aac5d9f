"""The IR frontends on the product path: @ovl/frontends' two examples — Mercury's async-TP
GEMM schedule lowered from CommIR (a pull ring: host waits on the peer's slot) and a
partition-IR reshard of a row-sharded activation to replicated (a direct AllGather
collective, decomposed by compile() into pushes) — are run as scripts, which compile them
with the built-in TMA GEMM body and write their manifests; both CPU engines then check them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime._manifest.types import WaitOp

ROOT = Path(__file__).resolve().parents[3]
FRONTENDS = ROOT / "packages" / "frontends"
TSX = ROOT / "node_modules" / ".bin" / "tsx"
EMITTER = ROOT / "packages" / "tlx-emitter" / "dist" / "index.js"
EXAMPLES = [("async-tp.ts", "async_tp", 3), ("async-tp.ts", "async_tp", 4), ("partition-ag.ts", "partition_ag", 3)]
IDS = [f"{name}_w{world}" for _s, name, world in EXAMPLES]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    if shutil.which("node") is None or not TSX.exists() or not EMITTER.exists():
        pytest.skip(f"needs node, {TSX} and the built {EMITTER}")
    out = tmp_path_factory.mktemp("frontend_examples")
    for script, name, world in EXAMPLES:
        subprocess.run(
            [str(TSX), f"examples/{script}", str(out / f"{name}_w{world}"), str(world)],
            cwd=FRONTENDS,
            check=True,
            timeout=180,
            capture_output=True,
        )
    return out


def test_async_tp_forwards_through_waits_on_the_previous_rank(written):
    m = load_manifest(written / "async_tp_w4" / "manifest.json")
    waits = [(h.rank, op) for h in m.host_ops for s in h.streams for op in s.ops if isinstance(op, WaitOp)]
    assert len(waits) == 4 * 2  # steps 2 and 3 of every rank
    # lowerProgram's ring pulls from rank r + 1; step k forwards what r + 1 pulled at step k - 1.
    assert all(op.rank == (r + 1) % 4 for r, op in waits)


def test_the_partition_example_is_a_decomposed_all_gather(written):
    m = load_manifest(written / "partition_ag_w3" / "manifest.json")
    for h in m.host_ops:
        ops = [op for s in h.streams for op in s.ops]
        assert not any(isinstance(op, WaitOp) for op in ops)
        assert sorted(op.dst.rank for op in ops) == [q for q in range(3) if q != h.rank]


@pytest.mark.parametrize("case", IDS)
def test_frontend_examples_are_correct_in_the_numpy_engine(written, case):
    out = emulate(load_manifest(written / case / "manifest.json"), epochs=2, seed=7, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("case", IDS)
def test_frontend_examples_are_correct_running_their_own_source(written, case):
    out = emulate(load_manifest(written / case / "manifest.json"), epochs=2, seed=9, engine="interpret")
    out.raise_for_failure()
    assert all(c.ok for c in out.checks)
