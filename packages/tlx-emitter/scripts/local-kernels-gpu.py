"""Runs ovl's built-in bodies and the tutorial kernel on one GPU, alone and transformed.

Alone: each annotated file is a plain Triton kernel and must compute its GEMM. Transformed: the
golden modules of src/local/__golden__ (single rank, every slot already signalled) must compute the
same result in their remapped order, wait on the slots they name, and notify the slots they name.
Run from the repository root: python3 packages/tlx-emitter/scripts/local-kernels-gpu.py
"""
import importlib.util
import os
import sys

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "..", "runtime-py", "src"))
GOLDEN = os.path.join(ROOT, "src", "local", "__golden__")

BM, BN, BK, GROUP = 128, 128, 64, 8
M_BLOCKS = 8
M, N, K = M_BLOCKS * BM, 4 * BN, 256
DEV = "cuda"
SMS = torch.cuda.get_device_properties(0).multi_processor_count
triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=DEV))

failures = []


def load(path):
    name = os.path.basename(path).replace(".", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f" ({detail})" if detail else ""))
    if not ok:
        failures.append(what)


def close(c, ref):
    return torch.allclose(c.float(), ref.float(), atol=0.5, rtol=2e-2)


torch.manual_seed(0)
a = torch.randn((M, K), device=DEV, dtype=torch.bfloat16)
b = torch.randn((K, N), device=DEV, dtype=torch.bfloat16)
ref = (a.float() @ b.float())
tiles = M_BLOCKS * (N // BN)
grid = (min(SMS, tiles),)


def runtime_args(slots, target=1, filled=True, timeout_ns=2_000_000_000):
    sig = torch.full((slots,), target if filled else 0, dtype=torch.int32, device=DEV)
    err = torch.zeros((5,), dtype=torch.int32, device=DEV)
    return sig, err, [sig, err, 0, target, timeout_ns]


def table(values):
    return torch.tensor(values, dtype=torch.int32, device=DEV)


# --- the TMA consumer body -------------------------------------------------------------------
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    body = load(os.path.join(ROOT, "kernels", "gemm_tma_persistent.py"))
    c = torch.empty((M, N), device=DEV, dtype=dtype)
    body.gemm_tma_persistent[grid](a, b, c, M, N, K, BM, BN, BK, GROUP)
    check(f"gemm_tma_persistent alone, C {dtype}", close(c, ref))

ident = load(os.path.join(GOLDEN, "gemm_tma_persistent.identity.py"))
sig, err, rt = runtime_args(M_BLOCKS)
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
ident.gemm_tma_persistent[grid](a, b, c, M, N, K, BM, BN, BK, GROUP, *rt)
check("gemm_tma_persistent identity-transformed", close(c, ref) and int(err[0]) == 0, f"err {err.tolist()}")

# A slot left unsignalled: the bounded wait must time out and record it.
sig, err, rt = runtime_args(M_BLOCKS, timeout_ns=2_000_000)
sig[5] = 0
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
ident.gemm_tma_persistent[grid](a, b, c, M, N, K, BM, BN, BK, GROUP, *rt)
torch.cuda.synchronize()
check("transformed consumer waits on its slot (timeout recorded for slot 5)", int(err[0]) == 1 and int(err[2]) == 5, f"err {err.tolist()}")

order = [3, 0, 7, 1, 6, 2, 5, 4]
wait0 = [0, -1, 2, 3, -1, 5, 6, 7]
consumer_tables = [table(order), table(wait0), 1]  # rank_off = 1: second column (2*mb + 1) % 16
tabled = load(os.path.join(GOLDEN, "gemm_tma_persistent.tables.py"))
sig, err, rt = runtime_args(16)
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
tabled.gemm_tma_persistent[grid](a, b, c, M, N, K, BM, BN, BK, GROUP, *consumer_tables, *rt)
check("gemm_tma_persistent table-transformed (permuted order, two columns)", close(c, ref) and int(err[0]) == 0, f"err {err.tolist()}")

# --- the grouped GEMM body -------------------------------------------------------------------
E = 3
group = [0, 0, 1, 1, 1, 2, 2, 0]
bg = torch.randn((E, K, N), device=DEV, dtype=torch.bfloat16)
gref = torch.cat([a[m * BM:(m + 1) * BM].float() @ bg[group[m]].float() for m in range(M_BLOCKS)])
body = load(os.path.join(ROOT, "kernels", "grouped_gemm.py"))
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
body.grouped_gemm[grid](a, bg, c, table(group), M, N, K, BM, BN, BK)
check("grouped_gemm alone", close(c, gref))
tabled = load(os.path.join(GOLDEN, "grouped_gemm.tables.py"))
sig, err, rt = runtime_args(16)
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
tabled.grouped_gemm[grid](a, bg, c, table(group), M, N, K, BM, BN, BK, *consumer_tables, *rt)
check("grouped_gemm table-transformed", close(c, gref) and int(err[0]) == 0, f"err {err.tolist()}")

# --- the tutorial kernel ---------------------------------------------------------------------
strides = [a.stride(0), a.stride(1), b.stride(0), b.stride(1), N, 1]
tut = load(os.path.join(ROOT, "examples", "user-kernels", "tutorial_matmul.py"))
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
tut.matmul_kernel_persistent[grid](a, b, c, M, N, K, *strides, BM, BN, BK, GROUP, grid[0])
check("tutorial matmul alone", close(c, ref))
for name, extra in (("identity", []), ("tables", consumer_tables)):
    mod = load(os.path.join(GOLDEN, f"tutorial_matmul.{name}.py"))
    sig, err, rt = runtime_args(16)
    c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
    mod.matmul_kernel_persistent[grid](a, b, c, M, N, K, *strides, BM, BN, BK, GROUP, grid[0], *extra, *rt)
    check(f"tutorial matmul {name}-transformed", close(c, ref) and int(err[0]) == 0, f"err {err.tolist()}")

# --- the producer body -----------------------------------------------------------------------
body = load(os.path.join(ROOT, "kernels", "gemm_producer.py"))
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
body.gemm_producer[grid](a, b, c, M, N, K, BM, BN, BK, GROUP)
check("gemm_producer alone", close(c, ref))

mod = load(os.path.join(GOLDEN, "gemm_producer.static.py"))
sig = torch.zeros((4,), dtype=torch.int32, device=DEV)
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
mod.gemm_producer[grid](a, b, c, M, N, K, BM, BN, BK, GROUP, sig, 0)
check("gemm_producer static-transformed: result, 8 notifies per slot t % 4", close(c, ref) and sig.tolist() == [8, 8, 8, 8], f"sig {sig.tolist()}")

perm = torch.randperm(tiles, generator=torch.Generator().manual_seed(1)).tolist()
n0 = [t // 4 for t in range(tiles)]  # slot = m-block of the tile
n1 = [8 if t % 2 == 0 else -1 for t in range(tiles)]
mod = load(os.path.join(GOLDEN, "gemm_producer.tables.py"))
sig = torch.zeros((9,), dtype=torch.int32, device=DEV)
c = torch.empty((M, N), device=DEV, dtype=torch.bfloat16)
mod.gemm_producer[grid](a, b, c, M, N, K, BM, BN, BK, GROUP, table(perm), table(n0), table(n1), sig, 0)
check("gemm_producer table-transformed: result, 4 notifies per m-block, 16 on slot 8", close(c, ref) and sig.tolist() == [4] * 8 + [16], f"sig {sig.tolist()}")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
