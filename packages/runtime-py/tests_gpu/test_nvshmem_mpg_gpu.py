"""ovl's ``nvshmem`` operators with two (and four) processes on one GPU, on NVSHMEM bootstrapped by the runner through
nvshmem4py, through pytest: the same runs as ``nvshmem_mpg.py`` (which says how the manifests are emitted), each
world's manifests under torchrun with every process on GPU 0, checked against the float32 reference over several
epochs of fresh random inputs, and the fault case (a stalled rank is a bounded ``WaitTimeout``, no hang).

Needs a CUDA device, nvshmem4py (``ovl-runtime[nvshmem]``) and the emitted manifests in ``$OVL_MPG_MANIFESTS``
(default ``<repo>/out-nvd``). Skipped otherwise. Times here are not performance figures.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import nvshmem_mpg as mpg  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = Path(os.environ.get("OVL_MPG_MANIFESTS", ROOT / "out-nvd"))
EPOCHS = 5


def _unavailable() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA device"
    if importlib.util.find_spec("nvshmem") is None:
        return "needs nvshmem4py (pip install 'ovl-runtime[nvshmem]')"
    if not any(MANIFESTS.glob("w*/*/manifest.json")):
        return f"no emitted manifests under {MANIFESTS} (see nvshmem_mpg.py)"
    return None


pytestmark = pytest.mark.skipif(_unavailable() is not None, reason=_unavailable() or "")


@pytest.mark.parametrize("world", [2, 4])
def test_nvshmem_operators_match_the_reference_with_every_process_on_one_gpu(world, tmp_path):
    if not (MANIFESTS / f"w{world}").is_dir():
        pytest.skip(f"no world-{world} manifests under {MANIFESTS}")
    rows = mpg.run_world(MANIFESTS, tmp_path, world, EPOCHS, timeout_s=300)
    print("\n" + mpg.table(rows))
    assert rows and all(r.ok for r in rows), mpg.table(rows)


def test_a_stalled_rank_is_a_bounded_wait_timeout_on_its_peer(tmp_path):
    row = mpg.run_fault(MANIFESTS, tmp_path, timeout_s=240)
    print("\n" + mpg.table([row]))
    assert row.ok, row.detail
