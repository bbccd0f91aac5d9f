"""``ovl_runtime.transpose``: the tiled transpose the backward passes hand their dual operators ``wᵀ`` with. Its
Triton kernel runs under Triton's interpreter here (in a process of its own: the interpreter must be on before
triton is imported), at shapes that are not whole tiles, batched or not; CPU tensors take torch's copy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ovl_runtime._emulate.interpret_load import interpret_unavailable  # noqa: E402
from ovl_runtime._torch_api.transpose import tile_grid, transposed  # noqa: E402


@pytest.mark.parametrize("shape", [(1, 1), (3, 70), (2, 5, 9), (2, 3, 4, 6), (0, 4)])
def test_cpu_tensors_get_the_contiguous_transpose(shape):
    w = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
    got = transposed(w)
    assert got.is_contiguous() and got.shape == (*shape[:-2], shape[-1], shape[-2])
    assert torch.equal(got, w.transpose(-1, -2))


def test_a_tensor_without_two_dimensions_is_refused():
    with pytest.raises(ValueError, match="1 dimension"):
        transposed(torch.zeros(4))


def test_the_grid_covers_every_tile_of_every_matrix():
    assert tile_grid((130, 64), 64) == (3, 1, 1)
    assert tile_grid((4, 3, 1, 65), 64) == (1, 2, 12)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
def test_the_tiled_kernel_matches_torch_under_the_interpreter():
    code = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from ovl_runtime._torch_api.transpose import tile_grid, transpose_tiles
g = torch.Generator().manual_seed(3)
for shape, block in [((1, 1), 16), ((5, 70), 16), ((33, 17), 16), ((3, 40, 23), 16), ((2, 2, 16, 48), 16), ((64, 64), 32)]:
    for dtype in (torch.float32, torch.bfloat16):
        src = torch.randn(*shape, generator=g).to(dtype)
        out = torch.full((*shape[:-2], shape[-1], shape[-2]), float("nan"), dtype=dtype)
        transpose_tiles[tile_grid(shape, block)](src, out, shape[-2], shape[-1], BLOCK_R=block, BLOCK_C=block)
        assert torch.equal(out, src.transpose(-1, -2)), (shape, dtype)
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
