"""``ovl_runtime.transpose`` on the GPU: the tiled kernel against torch's copy of the transposed view, bit for bit,
at weight shapes of the MLP suite and at shapes that are not whole tiles, batched (the one-GPU mode's stacked
weights) or not."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from ovl_runtime._torch_api.transpose import transposed  # noqa: E402


@pytest.mark.parametrize("shape", [(4096, 11008), (5504, 4096), (1, 1), (65, 130), (3, 100, 77), (2, 2, 64, 1)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_tiled_transpose_is_torchs(shape, dtype):
    w = torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)
    got = transposed(w)
    assert got.is_contiguous() and got.data_ptr() != w.data_ptr()
    assert torch.equal(got, w.transpose(-1, -2))


def test_a_non_contiguous_weight_is_read_through_its_strides():
    w = torch.randn(96, 200, device="cuda", dtype=torch.bfloat16)[:, ::2]
    assert torch.equal(transposed(w), w.transpose(-1, -2))
