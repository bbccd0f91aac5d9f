"""``ovl_runtime.language``: the device primitives, both definitions.

The GPU definitions run in plain Python against a model of the GPU (``triton.jit`` is the
identity; inline asm reads a flat int32 memory for acquire loads, ticks a 1 ns clock for
``%globaltimer``, passes the token move through and logs the TMA wait; atomics and barriers
are logged). The interpreter definitions run under Triton's interpreter (needs torch and
triton).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from ovl_runtime._signals.board import epoch_target

LANGUAGE = Path(__file__).resolve().parents[1] / "src" / "ovl_runtime" / "language.py"


def i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


class I32(int):
    def __sub__(self, o):  # int32 arithmetic wraps, as on the device
        return I32(i32(int(self) - int(o)))

    def to(self, *_a, **_k):
        return int(self)


class Gpu:
    """Flat memory, a log, a clock; hooks set a word at its n-th acquire read."""

    def __init__(self) -> None:
        self.mem: dict[int, int] = {}
        self.log: list[tuple] = []
        self.clock = 0
        self.hooks: dict[tuple[int, int], int] = {}

    def asm(self, code, constraints, args, dtype=None, is_pure=None, pack=None):
        if "acquire" in code:
            reads = self.log.count(("read", args[0])) + 1
            self.log.append(("read", args[0]))
            if (args[0], reads) in self.hooks:
                self.mem[args[0]] = self.hooks[(args[0], reads)]
            return I32(i32(self.mem.get(args[0], 0)))
        if "globaltimer" in code:
            self.clock += 1
            return self.clock
        if "red.release" in code:
            # The predicated notify: where args[0], the wait, the barrier and thread 0's release add at args[1].
            if args[0]:
                scope = "gpu" if "red.release.gpu" in code else "sys"
                self.log.extend([("tma-wait",), ("barrier",), ("add", args[1], args[2], "release", scope)])
                self.mem[args[1]] = i32(self.mem.get(args[1], 0) + args[2])
            return 0
        # One statement may wait for this thread's bulk stores and then be a barrier of the program.
        events = sorted((code.find(k), e) for k, e in (("cp.async.bulk.wait_group 0", "tma-wait"), ("bar.sync", "barrier")) if k in code)
        if events:
            self.log.extend((e,) for _, e in events)
            return 0
        return args[0]

    def atomic_xchg(self, p, v):
        self.mem[p] = int(v)
        self.log.append(("xchg", p, int(v)))

    def atomic_add(self, p, v, mask=None, sem=None, scope=None):
        if mask is None or mask:
            self.mem[p] = i32(self.mem.get(p, 0) + v)
            self.log.append(("add", p, v, sem, scope))


@pytest.fixture
def gpu_language(monkeypatch):
    """language.py with its GPU definitions, over a fake triton bound to a ``Gpu``."""
    gpu = Gpu()
    tl = types.ModuleType("triton.language")
    tl.__dict__.update(
        inline_asm_elementwise=gpu.asm,
        atomic_xchg=gpu.atomic_xchg,
        atomic_add=gpu.atomic_add,
        cast=lambda x, *_a, **_k: int(x),
        debug_barrier=lambda: gpu.log.append(("barrier",)),
        load=lambda p, **_k: I32(gpu.mem.get(p, 0)),
        store=None,
        pointer_type=lambda t: t,
        int32="i32",
        int64="i64",
    )
    triton = types.ModuleType("triton")
    triton.jit = lambda f: f
    triton.language = tl
    triton.knobs = types.SimpleNamespace(runtime=types.SimpleNamespace(interpret=False))
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.language", tl)
    spec = importlib.util.spec_from_file_location("ovl_language_under_test", LANGUAGE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.INTERPRET is False
    return mod, gpu


SIG, ERR = 0, 1000


def _wait(mod, gpu, sig, target, timeout, hook=None):
    gpu.mem.clear(), gpu.log.clear(), gpu.hooks.clear()
    gpu.clock = 0
    gpu.mem[SIG + 3] = sig
    if hook:
        gpu.hooks[(SIG + 3, hook[0])] = hook[1]
    got = mod.wait_slot(SIG, 3, I32(i32(target)), ERR, 5, timeout)
    return int(got), gpu.log.count(("read", SIG + 3)), [gpu.mem.get(ERR + i, 0) for i in range(5)]


def test_wait_slot_is_wrap_aware_bounded_and_records_its_timeout(gpu_language):
    mod, gpu = gpu_language
    ok = [0, 0, 0, 0, 0]
    assert _wait(mod, gpu, 7, 7, 100) == (7, 1, ok)
    assert _wait(mod, gpu, 9, 7, 100)[::2] == (9, ok)
    assert _wait(mod, gpu, 6, 7, 100, hook=(4, 7)) == (7, 4, ok)  # the 4th read sees the arrival
    got, reads, err = _wait(mod, gpu, 6, 7, 50)
    assert (got, err) == (7, [1, 5, 3, 6, 7]) and reads > 10  # gives up, records (1, rank, slot, seen, target)
    assert _wait(mod, gpu, i32(2**31 + 1), 2**31 - 1, 100)[1:] == (1, ok)  # wrapped past 2^31 - 1: reached
    assert _wait(mod, gpu, 2**31 - 3, i32(2**31 + 1), 20)[2] == [1, 5, 3, 2**31 - 3, -(2**31) + 1]


def test_notifies_complete_tma_stores_then_barrier_then_release(gpu_language):
    mod, gpu = gpu_language
    mod.notify_slot(SIG, 2)
    assert gpu.log == [("tma-wait",), ("barrier",), ("add", SIG + 2, 1, "release", "sys")]
    gpu.log.clear()
    # Masked off (a tile that notifies nothing): the wait and the barrier, no add.
    mod.notify_slot(SIG, 2, False)
    assert gpu.log == [("tma-wait",), ("barrier",)] and gpu.mem[SIG + 2] == 1
    gpu.log.clear()
    mod.notify_slot_gpu(SIG, 2)
    assert gpu.log == [("tma-wait",), ("barrier",), ("add", SIG + 2, 1, "release", "gpu")]
    gpu.log.clear()
    # The predicated notifies: where the condition holds the same wait, barrier and add; where not, nothing.
    mod.notify_slot_if(SIG, 5, False, 1)
    mod.notify_slot_gpu_if(SIG, 5, False, 2)
    assert gpu.log == [] and SIG + 5 not in gpu.mem
    mod.notify_slot_if(SIG, 5, True, 1)
    mod.notify_slot_gpu_if(SIG, 6, True, 3)  # one add for three tiles
    assert gpu.log == [("tma-wait",), ("barrier",), ("add", SIG + 5, 1, "release", "sys")] + [
        ("tma-wait",),
        ("barrier",),
        ("add", SIG + 6, 3, "release", "gpu"),
    ]
    assert (gpu.mem[SIG + 5], gpu.mem[SIG + 6]) == (1, 3)
    gpu.log.clear()
    gpu.mem[2000 + 1] = 500
    mod.peer_notify(2000, 1, 4)
    assert gpu.log == [("tma-wait",), ("barrier",), ("add", 504, 1, "release", "sys")]


def test_every_primitive_is_defined_once_in_each_mode():
    text = LANGUAGE.read_text()
    names = next(
        ast.literal_eval(n.value)
        for n in ast.parse(text).body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "DEVICE_FUNCTIONS"
    )
    assert len(names) == 14
    for f in names:
        n = text.count(f"\ndef {f}(") + text.count(f"\n    def {f}(")
        assert n in (1, 2), f
        assert f"@triton.jit\ndef {f}(" in text or f"@triton.jit\n    def {f}(" in text
    assert "import torch" not in text


needs_interpreter = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None,
    reason="needs torch and triton (pip install 'ovl-runtime[interpret]')",
)

KERNEL = """
import triton
import triton.language as tl
from ovl_runtime.language import consume_token, load_epoch_target, peer_base, wait_slot


@triton.jit
def probe(sig_ptr, err_ptr, out_ptr, ptrs, x_ptr, target, timeout_ns, epoch_ptr, tgt_ptr):
    tl.store(tgt_ptr, load_epoch_target(epoch_ptr, 3))
    tok = wait_slot(sig_ptr, 0, target, err_ptr, 3, timeout_ns)
    i = consume_token(tl.program_id(0) * 0, tok)
    tl.store(out_ptr + i, tok)
    offs = tl.arange(0, 4)
    tl.store(x_ptr + offs, (tl.load(peer_base(ptrs, 1, x_ptr) + offs).to(tl.float32) * 2).to(tl.bfloat16))
"""


@needs_interpreter
def test_interpreter_definitions_wait_wrap_aware_time_out_and_type_peer_pointers(tmp_path):
    import time

    import torch

    from ovl_runtime._emulate.interpret_load import interpreter_mode
    from ovl_runtime._emulate.interpret_patch import patched

    lang = interpreter_mode()
    assert lang.INTERPRET
    (tmp_path / "probe_kernel.py").write_text(KERNEL)
    sys.path.insert(0, str(tmp_path))
    try:
        import probe_kernel
    finally:
        sys.path.remove(str(tmp_path))
    x, peer = torch.zeros(4, dtype=torch.bfloat16), torch.arange(4, dtype=torch.bfloat16)
    ptrs = torch.tensor([x.data_ptr(), peer.data_ptr()], dtype=torch.int64)

    epoch, tgt = torch.tensor([i32(2**31 + 5)], dtype=torch.int32), torch.zeros(1, dtype=torch.int32)

    def run(sig_value, target, timeout_ns):
        sig, err, out = (
            torch.tensor([i32(sig_value)], dtype=torch.int32),
            torch.zeros(8, dtype=torch.int32),
            torch.zeros(1, dtype=torch.int32),
        )
        with patched():
            t0 = time.monotonic()
            probe_kernel.probe[(1,)](sig, err, out, ptrs, x, i32(target), timeout_ns, epoch, tgt)
        return err.tolist()[:5], int(out[0]), time.monotonic() - t0

    assert run(2**31 + 1, 2**31 - 1, 10**9)[:2] == ([0] * 5, i32(2**31 + 1))  # wrapped: reached at once
    assert x.tolist() == [0.0, 2.0, 4.0, 6.0]  # peer 1's bf16 buffer, through the table
    # The epoch word's target wraps in int32 exactly as the host's rule does.
    assert int(tgt[0]) == i32(epoch_target(2**31 + 5, 3, 32))
    err, tok, elapsed = run(5, 6, 200_000_000)
    assert err == [1, 3, 0, 5, 6] and tok == 6 and 0.2 <= elapsed < 5


BF16_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def bf16_math(a_ptr, b_ptr, c_ptr, d_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    tl.store(c_ptr + offs, tl.maximum(a * b + a * 2 - 1, -0.5))
    acc = tl.dot(tl.reshape(a, (8, 8)), tl.reshape(b, (8, 8)))
    tl.store(d_ptr + tl.arange(0, 8)[:, None] * 8 + tl.arange(0, 8)[None, :], acc)
"""


@needs_interpreter
def test_bf16_arithmetic_under_the_interpreter_rounds_like_torch(tmp_path):
    import torch

    from ovl_runtime._emulate.interpret_load import interpreter_mode
    from ovl_runtime._emulate.interpret_patch import patched

    interpreter_mode()
    (tmp_path / "bf16_kernel.py").write_text(BF16_KERNEL)
    sys.path.insert(0, str(tmp_path))
    try:
        import bf16_kernel
    finally:
        sys.path.remove(str(tmp_path))
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(64, generator=g).bfloat16() for _ in range(2))
    c, d = torch.zeros(64, dtype=torch.bfloat16), torch.zeros(8, 8)
    with patched():
        bf16_kernel.bf16_math[(1,)](a, b, c, d, N=64)
    assert torch.equal(c, torch.clamp(a * b + a * 2 - 1, min=-0.5))
    assert torch.allclose(d, a.float().reshape(8, 8) @ b.float().reshape(8, 8), atol=1e-5)
