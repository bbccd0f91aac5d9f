"""``ovl_runtime.silu_mul`` on the GPU: SiLU-mul and its derivative in bf16 against float64, at an MLP width and
at widths that are not whole blocks. The kernels compute in fp32 and round once, so they are as close to
float64 as torch's bf16 ops one after the other (which round after each op), within 10%."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from ovl_runtime.operators.mlp.silu_mul import silu_mul  # noqa: E402


def _err(got: torch.Tensor, want: torch.Tensor) -> float:
    want = want.detach()
    return float((got.detach().double() - want).norm() / want.norm())


@pytest.mark.parametrize("shape", [(8192, 2 * 5504), (3, 2 * 37), (2, 5, 2 * 1025)])
def test_silu_mul_and_its_derivative_are_as_close_to_float64_as_torchs(shape):
    g = torch.Generator(device="cuda").manual_seed(11)
    gu = torch.randn(*shape, device="cuda", generator=g).to(torch.bfloat16).requires_grad_(True)
    dh = torch.randn(*shape[:-1], shape[-1] // 2, device="cuda", generator=g).to(torch.bfloat16)
    inter = shape[-1] // 2
    exact = gu.detach().double().requires_grad_(True)
    h_exact = torch.nn.functional.silu(exact[..., :inter]) * exact[..., inter:]
    (d_exact,) = torch.autograd.grad(h_exact, exact, dh.double())
    h = silu_mul(gu)
    (d,) = torch.autograd.grad(h, gu, dh)
    h_torch = torch.nn.functional.silu(gu[..., :inter]) * gu[..., inter:]
    (d_torch,) = torch.autograd.grad(h_torch, gu, dh)
    assert h.dtype == d.dtype == torch.bfloat16 and d.shape == gu.shape and d.is_contiguous()
    assert _err(h, h_exact) <= _err(h_torch, h_exact) * 1.1 + 1e-6
    assert _err(d, d_exact) <= _err(d_torch, d_exact) * 1.1 + 1e-6
