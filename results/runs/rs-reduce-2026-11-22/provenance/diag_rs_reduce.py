"""Diagnostic: what limits the ReduceScatter's reduction kernel? One GPU, no peers.

Times variants of the `rs-reduce` loop on a slab of the MLP shapes with every arrival slot
pre-satisfied (so only the kernel's own cost is measured): persistent grid size, warps,
tile width, waits unrolled across ranks or looped, acquire scope (sys / gpu) and no waits at
all (the pure reduction bandwidth). Each variant is checked against torch's sum.

    python3 packages/bench/gpu/diag/diag_rs_reduce.py [--json OUT.json] [--quick]

--quick times only the emitted kernel before the fix and the configuration the emitter
now uses (4 warps, BLOCK_N 128, ranks unrolled, system-scope waits) at 64 programs, one per
SM (as emitted) and two per SM.
"""
import argparse
import itertools
import json
import sys

import torch
import triton
import triton.language as tl
from timing import median_ms


@triton.jit
def ld_acq(ptr, SYS: tl.constexpr):
    if SYS:
        return tl.inline_asm_elementwise("ld.global.acquire.sys.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)
    else:
        return tl.inline_asm_elementwise("ld.global.acquire.gpu.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def wait(sig_ptr, slot, target, SYS: tl.constexpr):
    v = ld_acq(sig_ptr + slot, SYS)
    while (v - target) < 0:
        v = ld_acq(sig_ptr + slot, SYS)
    return v


@triton.jit
def tok(x, t):
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x, t], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def slab(part_ptr, offset, k, OLD: tl.constexpr):
    """The slab's base pointer through the wait's token. OLD: the hint on the integer offset,
    which Triton drops (the loads stay scalar); else the hint on the pointer."""
    if OLD:
        return part_ptr + tl.multiple_of(tok(offset, k), 16)
    else:
        return tl.multiple_of(part_ptr + tok(offset, k), 16)


@triton.jit
def rs_variant(part_ptr, out_ptr, sig_ptr, slot_ptr, N, target, rows_per_rank,
               WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               UNROLL: tl.constexpr, SYS: tl.constexpr, WAIT: tl.constexpr, HOIST: tl.constexpr, OLD: tl.constexpr):
    blocks = rows_per_rank // BLOCK_M
    num_pn = tl.cdiv(N, BLOCK_N)
    for t in range(tl.program_id(0), blocks * num_pn, tl.num_programs(0)):
        mb = t // num_pn
        pn = t % num_pn
        rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = cols[None, :] < N
        off = rows[:, None] * N + cols[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if HOIST:
            # Every rank's wait first, then every load: one token for all of them.
            k = 0
            if WAIT:
                for p in tl.static_range(WORLD):
                    k += wait(sig_ptr, tl.load(slot_ptr + p * blocks + mb), target, SYS)
            for p in tl.static_range(WORLD):
                acc += tl.load(slab(part_ptr, p * rows_per_rank * N, k, OLD) + off, mask=mask).to(tl.float32)
        elif UNROLL:
            for p in tl.static_range(WORLD):
                k = 0
                if WAIT:
                    k = wait(sig_ptr, tl.load(slot_ptr + p * blocks + mb), target, SYS)
                acc += tl.load(slab(part_ptr, p * rows_per_rank * N, k, OLD) + off, mask=mask).to(tl.float32)
        else:
            for p in range(WORLD):
                k = 0
                if WAIT:
                    k = wait(sig_ptr, tl.load(slot_ptr + p * blocks + mb), target, SYS)
                acc += tl.load(slab(part_ptr, p * rows_per_rank * N, k, OLD) + off, mask=mask).to(tl.float32)
        tl.store(out_ptr + off, acc.to(tl.bfloat16), mask=mask)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows_out = []
    # (label, world, rows per rank, N): MLP-1/2 GEMM+RS at worlds 2 and 4 (H = 4096), MLP-5 at 2 (H = 8192).
    shapes = [("H4096_w2", 2, 4096, 4096), ("H4096_w4", 4, 2048, 4096), ("H8192_w2", 2, 4096, 8192)]
    for label, world, rpr, n in shapes:
        part = torch.randn(world, rpr, n, device="cuda", dtype=torch.bfloat16)
        ref = part.float().sum(0).to(torch.bfloat16)
        out = torch.empty(rpr, n, device="cuda", dtype=torch.bfloat16)
        sig = torch.full((world * rpr // 128 + 1,), 5, device="cuda", dtype=torch.int32)
        slots = torch.arange(world * rpr // 128, device="cuda", dtype=torch.int32)
        moved = part.numel() * 2 + out.numel() * 2
        t_copy = median_ms(lambda: torch.sum(part, 0, out=out))
        rows_out.append({"shape": label, "variant": "torch.sum", "ms": t_copy, "GBps": moved / t_copy / 1e6})
        print(f"{label}: torch.sum {t_copy:.4f} ms ({moved / t_copy / 1e6:.0f} GB/s)", flush=True)
        # The emitted kernel before the fix (scalar loads), then the space around the fix.
        configs = [(4, 128, False, False, True, True, True)]
        for warps, bn, (unroll, hoist), sysscope, waits in itertools.product((4, 8), (128, 256), ((False, False), (True, False), (True, True)), (True, False), (True, False)):
            if not waits and not sysscope:
                continue  # scope is moot without waits
            configs.append((warps, bn, unroll, hoist, sysscope, waits, False))
        if args.quick:
            configs = [(4, 128, False, False, True, True, True), (4, 128, True, False, True, True, False)]
        for warps, bn, unroll, hoist, sysscope, waits, old in configs:
            tiles = (rpr // 128) * (n // bn)
            for programs in ((64, sms, 2 * sms) if args.quick else (64, sms, 2 * sms, 4 * sms, tiles)):
                programs = min(programs, tiles)
                out.fill_(0)

                def go():
                    rs_variant[(programs,)](part, out, sig, slots, n, 5, rpr, WORLD=world, BLOCK_M=128, BLOCK_N=bn,
                                            UNROLL=unroll, SYS=sysscope, WAIT=waits, HOIST=hoist, OLD=old, num_warps=warps, num_stages=1)

                go()
                torch.cuda.synchronize()
                ok = torch.equal(out, ref) or float((out.float() - ref.float()).abs().max()) < 0.07
                t = median_ms(go)
                name = ("OLD " if old else "") + f"w{warps} bn{bn} {'hoist' if hoist else 'unroll' if unroll else 'loop'} {'sys' if sysscope else 'gpu'}{'' if waits else ' nowait'} P{programs}"
                rows_out.append({"shape": label, "variant": name, "warps": warps, "BLOCK_N": bn, "unroll": unroll, "hoist": hoist,
                                 "sys": sysscope, "waits": waits, "old": old, "programs": programs, "ms": t, "GBps": moved / t / 1e6, "ok": ok})
                print(f"{label}: {name:40s} {t:.4f} ms {moved / t / 1e6:6.0f} GB/s {'ok' if ok else 'WRONG'}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__, "rows": rows_out}, f, indent=1)
    best = {}
    for r in rows_out:
        if r.get("waits") and r.get("ok") and (r["shape"] not in best or r["ms"] < best[r["shape"]]["ms"]):
            best[r["shape"]] = r
    for s, r in best.items():
        print(f"BEST {s}: {r['variant']} {r['ms']:.4f} ms {r['GBps']:.0f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
