"""The fused MLP on a GPU, every rank in one process (``OneGpuGroup``): ``tp_mlp`` and its first
stage against torch at worlds 2, 4 and 8 (eager and CUDA-graph replays), and the built-in
``gemm_silu_mul`` body alone against cuBLAS's gate/up GEMM + torch's SiLU-mul at the per-rank
shapes of MLP-1…6 at world 8 (numerics checked; times reported, not asserted).

Needs a CUDA device and the compiled kernels: the keys below on ``$OVL_KERNELS`` (made on a
machine with ovl's CLI by ``python tests_gpu/test_mlp_gpu.py --prepare DIR``) or a compiler at
hand (``$OVL_CLI``). The speed comparison writes ``mlp-body-speed.json`` into
``$OVL_RESULTS_DIR`` when set. Times in the one-GPU mode are not performance figures.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from support import dtypes, prepare_main, rand, rel, unavailable  # noqa: E402

from ovl_runtime import ops as _ops  # noqa: E402, F401 - sets CUDA_DEVICE_MAX_CONNECTIONS before CUDA starts
from ovl_runtime._kernels import library as lib  # noqa: E402

BODY = Path(__file__).resolve().parents[2] / "tlx-emitter" / "kernels" / "gemm_silu_mul.py"
#: (world, tokens, hidden, intermediate of all ranks) of the chain's correctness tests.
MLPS = [(2, 1024, 1024, 2048), (4, 1024, 1024, 2048), (8, 1024, 1024, 2048), (4, 512, 512, 1536)]
#: The TP MLP layer's test in test_torch_api_gpu.py (nn.TensorParallelMLP now calls tp_mlp).
LAYER = (8, 1024, 1024, 4096)
#: MLP-1…6 (tokens, hidden, intermediate; TileLink Table 4) at world 8: the body's per-rank GEMM
#: is [tokens, hidden] @ [hidden, 2 · intermediate / 8].
SUITE = {
    "MLP-1": (8192, 4096, 11008),
    "MLP-2": (8192, 4096, 14336),
    "MLP-3": (8192, 3584, 14336),
    "MLP-4": (8192, 4608, 36864),
    "MLP-5": (8192, 8192, 28672),
    "MLP-6": (8192, 8192, 29568),
}


def mlp_keys(world: int, tokens: int, hidden: int, inter: int, dtype: str = "bf16") -> list[lib.KernelKey]:
    i = inter // world
    return [lib.KernelKey("ag-gemm-silu", world, tokens, i, hidden, dtype), lib.call_key("gemm-rs", world, tokens, hidden, i, dtype)]


def all_keys() -> list[lib.KernelKey]:
    # The chain's correctness tests run in bf16 and fp16; the layer's (test_torch_api_gpu.py) in bf16.
    return [k for s in MLPS for d in lib.COMMON_DTYPES for k in mlp_keys(*s, d)] + mlp_keys(*LAYER)


pytestmark = pytest.mark.skipif(unavailable(all_keys()) is not None, reason=unavailable(all_keys()) or "")


def _dense(x, w_gate_up, w_down):
    """Every rank's weights side by side: the dense MLP, [tokens, hidden]."""
    world, _, two_i = w_gate_up.shape
    i = two_i // 2
    wg = torch.cat([w_gate_up[r, :, :i] for r in range(world)], dim=1)
    wu = torch.cat([w_gate_up[r, :, i:] for r in range(world)], dim=1)
    wd = torch.cat(list(w_down.unbind(0)), dim=0)
    return (torch.nn.functional.silu(x.float() @ wg.float()) * (x.float() @ wu.float())) @ wd.float()


@pytest.mark.parametrize("dtype", dtypes(), ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize(("world", "tokens", "hidden", "inter"), MLPS)
def test_tp_mlp_matches_the_dense_mlp_eager_and_replayed(world, tokens, hidden, inter, dtype):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.ops import all_gather_matmul_silu_mul, tp_mlp

    g = OneGpuGroup(world)
    i = inter // world
    x = rand(tokens, hidden, seed=1, dtype=dtype)
    wgu = rand(world, hidden, 2 * i, seed=2, dtype=dtype) / 32
    wd = rand(world, i, hidden, seed=3, dtype=dtype) / 32
    xs = x.view(world, tokens // world, hidden).contiguous()
    with torch.no_grad():
        h = all_gather_matmul_silu_mul(xs, wgu, g)
        ops.synchronize(g)
        for r in range(world):
            want = torch.nn.functional.silu(x.float() @ wgu[r, :, :i].float()) * (x.float() @ wgu[r, :, i:].float())
            assert rel(h[r], want) < 0.02, f"rank {r}"
        y = tp_mlp(xs, wgu, wd, g)
        ops.synchronize(g)
        assert rel(y.reshape(tokens, hidden), _dense(x, wgu, wd)) < 0.02
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            yg = tp_mlp(xs, wgu, wd, g)
        for step in range(3):
            x2 = rand(tokens, hidden, seed=100 + step, dtype=dtype)
            xs.copy_(x2.view(world, tokens // world, hidden))
            graph.replay()
            ops.synchronize(g)
            assert rel(yg.reshape(tokens, hidden), _dense(x2, wgu, wd)) < 0.02, f"replay {step}"
    del graph


def _body():
    import triton

    spec = importlib.util.spec_from_file_location("gemm_silu_mul", BODY)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # Device-side TMA descriptors need scratch memory.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    return mod.gemm_silu_mul


def _time_ms(fn, reps: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def _compare(kernel, name: str, tokens: int, hidden: int, inter: int, tile: tuple[int, int, int]) -> dict:
    """The body and cuBLAS + torch SiLU-mul at one world-8 shape: outputs compared, times taken."""
    import triton

    bm, bn, bk = tile
    i = inter // 8
    x = rand(tokens, hidden, seed=11)
    wgu = rand(hidden, 2 * i, seed=12) / 32
    y = torch.empty(tokens, i, device="cuda", dtype=torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = (min(sms, triton.cdiv(tokens, bm) * triton.cdiv(i, bn)),)

    def fused():
        kernel[grid](x, wgu, y, tokens, i, hidden, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=8, num_stages=3)

    def unfused():
        h = x @ wgu
        return torch.nn.functional.silu(h[:, :i]) * h[:, i:]

    fused()
    torch.cuda.synchronize()
    assert rel(y, unfused()) < 0.02, name
    t_fused, t_torch = _time_ms(fused), _time_ms(unfused)
    flops = 2 * tokens * hidden * 2 * i
    return {
        "shape": name,
        "M": tokens,
        "K": hidden,
        "I": i,
        "fused_ms": t_fused,
        "cublas_plus_silu_mul_ms": t_torch,
        "speedup": t_torch / t_fused,
        "fused_tflops": flops / t_fused / 1e9,
    }


def test_the_body_against_cublas_and_torch_silu_mul_at_the_suites_world_8_shapes():
    kernel = _body()
    tile = (128, 128, 64)
    rows = [_compare(kernel, name, *shape, tile) for name, shape in SUITE.items()]
    out = {"device": torch.cuda.get_device_name(0), "tile": list(tile), "warps": 8, "stages": 3, "rows": rows}
    print(json.dumps(out, indent=2))
    where = os.environ.get("OVL_RESULTS_DIR")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / "mlp-body-speed.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    prepare_main("test_mlp_gpu.py", all_keys)
