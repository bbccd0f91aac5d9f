"""The torch API running the TLX kernels on a GPU, every rank in one process (``OneGpuGroup``, one H200, sm_90a):
``ops.all_gather_matmul`` and ``ops.matmul_reduce_scatter`` (its SM-push GEMM+ReduceScatter) bound to prepared TLX
cubins at worlds 2 and 4, at an MLP-suite shape and a smaller one; three eager calls on fresh inputs (the second and
third replay the operator's own CUDA graph, its cubin nodes' caller addresses rewritten) and a ``torch.cuda.graph``
capture replayed twice on changed inputs, each against a float32 torch reference; the bound operator must be the TLX
one. Prints a table of what ran.

The kernels are prepared where fbtriton is installed (the GPU machines have no TLX toolchain):
``python tests_gpu/test_tlx_torch_gpu.py --prepare DIR`` (``ovl emit --tlx`` + ``tlx-aot-compile.py`` per key, into
``<dirname>-tlx`` with its ``backend.json``); then ``OVL_KERNELS=DIR pytest tests_gpu/test_tlx_torch_gpu.py -s``.
Skipped without a CUDA device or the prepared directories. Times here are not performance figures.

Which kernels a call takes: ``OVL_TLX`` unset (``auto``) takes a prepared TLX directory where the tuned table measured
TLX faster (``fastestBackend()``): of these keys only the MLP-shape AllGather+GEMM. ``fastestBackend()`` keeps
GEMM+RS over SM pushes on Triton (3-14% faster end to end on four H200s) and takes nearest-shape entries for neither, so
the other keys run under ``OVL_TLX=1`` (every prepared TLX directory); the table prints which rule chose each.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ovl_runtime._kernels import library as lib
from ovl_runtime._kernels import tlx as tlx_lib

#: (operator, M, N, K, label) of the operator's GEMM as the library keys it (ag-gemm: M gathered rows, N and K a rank's;
#: gemm-rs: M rows before the scatter, K a rank's depth). The MLP shapes are MLP-1 (Llama-7B, I = 11008) on two ranks,
#: where the H200 table measured the TLX kernels faster than Triton (ag-gemm 0.5098 vs 0.5182 ms, gemm-rs 0.5176 vs
#: 0.5318 ms); the same GEMM runs at world 4.
SHAPES = [
    ("ag-gemm", 8192, 5504, 4096, "mlp1"),
    ("ag-gemm", 2048, 1024, 1024, "small"),
    ("gemm-rs", 8192, 4096, 5504, "mlp1"),
    ("gemm-rs", 2048, 1024, 1024, "small"),
]
WORLDS = (2, 4)
ROWS: list[str] = []


def tlx_keys() -> list[lib.KernelKey]:
    return [lib.KernelKey(op, w, m, n, k, "bf16", target="h200", tlx=True) for op, m, n, k, _ in SHAPES for w in WORLDS]


def _unavailable() -> str | None:
    try:
        import torch
    except ImportError:
        return "needs torch"
    if not torch.cuda.is_available():
        return "needs a CUDA device"
    missing = [k.dirname for k in tlx_keys() if lib.find(k) is None]
    if missing:
        return f"prepared TLX kernels missing ({', '.join(missing[:2])}...): set OVL_KERNELS (see --prepare)"
    return None


if __name__ != "__main__":
    torch = pytest.importorskip("torch")
    from support import rand, rel  # noqa: E402

    pytestmark = pytest.mark.skipif(_unavailable() is not None, reason=_unavailable() or "")


def _mode(key: lib.KernelKey) -> str:
    """``auto`` where the prepared directory's record says the table takes TLX, else ``1`` (forced)."""
    path = lib.find(key)
    assert path is not None
    return "auto" if tlx_lib.table_prefers_tlx(path.parent) else "1"


def _bound_tlx(key: lib.KernelKey):
    from ovl_runtime import ops

    found = [o for o in ops.operators() if getattr(o, "backend", None) == "tlx"]
    assert len(found) == 1 and len(ops.operators()) == 1, [getattr(o, "backend", None) for o in ops.operators()]
    op = found[0]
    assert op.m.name.endswith("_tlx") and any(k.precompiled is not None for k in op.m.kernels)
    assert (op.m.reference.M, op.m.reference.N, op.m.reference.K, op.m.world) == (key.m, key.n, key.k, key.world)
    return op


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize(("op_name", "M", "N", "K", "label"), SHAPES, ids=[f"{s[0]}-{s[4]}" for s in SHAPES])
def test_tlx_operator_matches_torch_eager_and_in_a_graph(op_name, M, N, K, label, world, monkeypatch):
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    key = lib.KernelKey(op_name, world, M, N, K, "bf16", target="h200", tlx=True)
    mode = _mode(key)
    monkeypatch.setenv("OVL_TLX", mode)
    monkeypatch.setenv("OVL_TARGET", "h200")
    g = OneGpuGroup(world)
    if op_name == "ag-gemm":
        m = M // world  # each rank's rows

        def inputs(seed: int):
            return rand(world, m, K, seed=seed) / 8, rand(world, K, N, seed=seed + 1) / 8

        def call(x, w):
            return ops.all_gather_matmul(x, w, g)

        def want(x, w):
            full = x.reshape(M, K).float()
            return torch.stack([full @ w[r].float() for r in range(world)])
    else:

        def inputs(seed: int):
            return rand(world, M, K, seed=seed) / 8, rand(world, K, N, seed=seed + 1) / 8

        def call(x, w):
            return ops.matmul_reduce_scatter(x, w, g)

        def want(x, w):
            return sum(x[r].float() @ w[r].float() for r in range(world)).view(world, M // world, N)

    eager = []
    for step in range(3):  # fresh inputs each call; the second call captures the operator's own graph
        x, w = inputs(10 * step)
        y = call(x, w)
        ops.synchronize(g)
        eager.append(rel(y, want(x, w)))
        assert eager[-1] < 0.01, (step, eager[-1])
    op = _bound_tlx(key)
    own = "own graph" if op.own is not None else f"direct: {op.direct_reason}"
    # A user's capture: replays read their epoch on the device and take the changed inputs.
    x, w = inputs(100)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        yg = call(x, w)
    replays = []
    for step in range(2):
        nx, nw = inputs(200 + 10 * step)
        x.copy_(nx)
        w.copy_(nw)
        graph.replay()
        ops.synchronize(g)
        replays.append(rel(yg, want(x, w)))
        assert replays[-1] < 0.01, (step, replays[-1])
    del graph
    rec = tlx_lib.read_record(lib.find(key).parent)  # type: ignore[union-attr]
    ms = rec.get("measuredMs") or {}
    ROWS.append(
        f"{op_name:8s} w{world} {M}x{N}x{K:<6d} {op.backend:4s} OVL_TLX={mode:4s} table:{rec.get('fastest', '?'):6s} "
        f"(tlx {ms.get('tlx', '-')} / triton {ms.get('triton', '-')} ms)  eager max rel {max(eager):.2e} "
        f"[{own}]  graph replays max rel {max(replays):.2e}"
    )


def test_zz_print_what_ran():
    """The table of what ran (run with -s to see it)."""
    print("\nTLX operators through the torch API (one H200, every rank in one process):")
    for r in ROWS:
        print("  " + r)


def prepare(into: Path) -> None:
    """Prepare every TLX key these tests bind into ``into`` (needs ovl's CLI and a Python with fbtriton)."""
    for key in tlx_keys():
        found = into / key.dirname / "manifest.json"
        print(found if found.is_file() else tlx_lib.prepare_tlx(key, into))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--prepare":
        prepare(Path(sys.argv[2]))
    else:
        sys.exit("usage: python tests_gpu/test_tlx_torch_gpu.py --prepare DIR")
