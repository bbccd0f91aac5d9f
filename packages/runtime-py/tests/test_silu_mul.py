"""``ovl_runtime.silu_mul``: SiLU-mul of a gate/up product and its derivative, the MLP layer's training path. Its
Triton kernels run under Triton's interpreter here (in a process of its own) at widths that are not whole blocks;
CPU tensors take torch's ops, and the op's registered backward passes ``gradcheck`` in float64."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ovl_runtime._emulate.interpret_load import interpret_unavailable  # noqa: E402
from ovl_runtime.operators.mlp.silu_mul import row_grid, silu_mul, silu_mul_backward  # noqa: E402


def _gu(*shape: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("shape", [(3, 8), (2, 5, 6), (1, 2)])
def test_the_forward_is_silu_of_the_gate_times_the_up_half(shape):
    gu = _gu(*shape, seed=sum(shape))
    inter = shape[-1] // 2
    torch.testing.assert_close(silu_mul(gu), torch.nn.functional.silu(gu[..., :inter]) * gu[..., inter:])


@pytest.mark.parametrize("shape", [(3, 8), (2, 4, 6)])
def test_the_registered_backward_passes_gradcheck(shape):
    gu = _gu(*shape, seed=7 + len(shape)).requires_grad_(True)
    assert torch.autograd.gradcheck(torch.ops.ovl.silu_mul, (gu,))


def test_the_backward_is_torch_autograds_of_the_sliced_product():
    gu = _gu(4, 10, seed=3).requires_grad_(True)
    dh = _gu(4, 5, seed=4)
    (want,) = torch.autograd.grad(torch.nn.functional.silu(gu[:, :5]) * gu[:, 5:], gu, dh)
    torch.testing.assert_close(silu_mul_backward(gu.detach(), dh), want)


def test_odd_widths_and_mismatched_gradients_are_refused():
    with pytest.raises(ValueError, match=r"\[3, 5\] must end in an even width"):
        silu_mul(_gu(3, 5, seed=1))
    with pytest.raises(ValueError, match=r"dh is \[3, 3\], the gate/up product \[3, 8\]"):
        silu_mul_backward(_gu(3, 8, seed=1), _gu(3, 3, seed=2))


def test_the_grid_has_a_program_per_row_and_block_of_columns():
    assert row_grid(8192, 14336, 1024) == (8192, 14)
    assert row_grid(3, 1025, 1024) == (3, 2)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
def test_the_kernels_match_the_formulas_under_the_interpreter():
    code = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from ovl_runtime.operators.mlp.silu_mul import row_grid, silu_mul_backward_rows, silu_mul_rows
g = torch.Generator().manual_seed(5)
for rows, inter, block in [(1, 1, 16), (5, 37, 16), (3, 64, 32), (2, 16, 16)]:
    gu = torch.randn(rows, 2 * inter, generator=g)
    dh = torch.randn(rows, inter, generator=g)
    h = torch.full((rows, inter), float("nan"))
    silu_mul_rows[row_grid(rows, inter, block)](gu, h, inter, BLOCK_C=block)
    gate, up = gu[:, :inter].double(), gu[:, inter:].double()
    torch.testing.assert_close(h.double(), torch.nn.functional.silu(gate) * up, rtol=1e-5, atol=1e-6)
    dgu = torch.full((rows, 2 * inter), float("nan"))
    silu_mul_backward_rows[row_grid(rows, inter, block)](gu, dh, dgu, inter, BLOCK_C=block)
    leaf = gu.double().requires_grad_(True)
    (want,) = torch.autograd.grad(torch.nn.functional.silu(leaf[:, :inter]) * leaf[:, inter:], leaf, dh.double())
    torch.testing.assert_close(dgu.double(), want, rtol=1e-5, atol=1e-6)
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
