"""Diagnostic: what the emitted ag-moe kernel's waits cost, variant by variant, with every chunk slot already
at its target (so every wait passes at once) at TileLink's MoE-1…6 per-rank shapes (world 8) on one GPU.

From each emitted non-persistent kernel (``moe_blocks_prepare.mjs``'s ``blocks/<MoE-n>/<config>``) the
variants below are written by editing the kernel's text, then checked and timed (with and without the
GPU held before each launch, ``moe-compute.py``'s ``time_cases``; and the host's enqueue time) beside the body without
waits and fused_moe at the same configuration (``moe_blocks.py``'s cases):

- ``emitted``: as compiled (per segment: the table load, an acquire load at system scope, the timer read);
- ``lazy-timer``: the timer read only when the first load finds the slot short;
- ``relaxed-fence``: relaxed loads at system scope in the loop, one ``fence.acq_rel.sys`` after it (the
  PTX acquire pattern), timer read only on a miss;
- ``vector-fence``: every segment's slot read at once (one volatile vector load, i.e. relaxed at system
  scope), one reduction; the loop of acquire waits only when a slot is short; one ``fence.acq_rel.sys``;
- ``vector-acquire``: every segment's slot read at once with acquire loads at system scope (one per
  element), one reduction whose result is the token; the loop only when a slot is short;
- ``no-acquire`` (unsafe, a measure only): volatile loads, no acquire, no fence;
- ``no-wait`` (unsafe, a measure only): the block's row range computed, no slot read.

    PYTHONPATH=$PWD/packages/runtime-py/src python3 packages/bench/gpu/diag/moe_wait_variants.py \\
        --emitted out-moe-blocks --out $OUT/moe-wait-variants.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import triton

from moe_blocks import BLOCKS, CONFIGS, plain_cases, shape_inputs
from moe_bodies import _load, fused_moe, part1, part1_emitted_cases, without_wait_errors

#: shape: the configurations timed (moe_blocks_prepare.mjs's folder names)
PICKS = {
    "MoE-1": ["128x256x64_g8_w8_s4"],
    "MoE-2": ["64x64x32_g8_w4_s3", "128x128x64_g1_w8_s3"],
    "MoE-3": ["128x256x64_g8_w8_s4"],
    "MoE-4": ["128x256x64_g8_w8_s4"],
    "MoE-5": ["128x128x64_g1_w8_s3"],
    "MoE-6": ["128x256x64_g8_w8_s4"],
}

HELPERS = """
from ovl_runtime.language import global_timer, ld_acquire_sys


@triton.jit
def _ld_relaxed_sys(ptr):
    return tl.inline_asm_elementwise("ld.global.relaxed.sys.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _ld_volatile(ptr):
    return tl.inline_asm_elementwise("ld.volatile.global.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _fence_acquire():
    return tl.inline_asm_elementwise("fence.acq_rel.sys; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _wait_lazy(sig_ptr, slot, target, err_ptr, rank, timeout_ns):
    v = ld_acquire_sys(sig_ptr + slot)
    if (v - target) < 0:
        t0 = global_timer()
        while (v - target) < 0:
            v = ld_acquire_sys(sig_ptr + slot)
            if global_timer() - t0 > timeout_ns:
                tl.atomic_xchg(err_ptr + 0, 1)
                v = target
    return v


@triton.jit
def _wait_relaxed(sig_ptr, slot, target, err_ptr, rank, timeout_ns):
    v = _ld_relaxed_sys(sig_ptr + slot)
    if (v - target) < 0:
        t0 = global_timer()
        while (v - target) < 0:
            v = _ld_relaxed_sys(sig_ptr + slot)
            if global_timer() - t0 > timeout_ns:
                tl.atomic_xchg(err_ptr + 0, 1)
                v = target
    return v


@triton.jit
def _wait_volatile(sig_ptr, slot, target, err_ptr, rank, timeout_ns):
    v = _ld_volatile(sig_ptr + slot)
    while (v - target) < 0:
        v = _ld_volatile(sig_ptr + slot)
    return v
"""

WAIT = "ovl_tok = wait_slot(ovl_sig_ptr, ovl_slot0, ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)"
CONSUME = "pid_m = consume_token(pid_m, ovl_tok)"


def variant(text: str, name: str) -> str:
    """The emitted kernel's text edited into variant ``name``."""
    if text.count(WAIT) != 1 or text.count(CONSUME) != 1:
        raise ValueError("the emitted kernel has not exactly one segment wait")
    header_end = text.index("\n\n@triton.jit")
    text = text[:header_end] + HELPERS + text[header_end:]
    if name == "emitted":
        return text
    if name == "lazy-timer":
        return text.replace(WAIT, WAIT.replace("wait_slot(", "_wait_lazy("))
    if name == "no-acquire":
        return text.replace(WAIT, WAIT.replace("wait_slot(", "_wait_volatile("))
    if name == "no-wait":
        return text.replace(WAIT, "ovl_tok = ovl_slot0")
    if name == "relaxed-fence":
        text = text.replace(WAIT, WAIT.replace("wait_slot(", "_wait_relaxed("))
        loop = re.search(r"^( *)for ovl_seg in range\(", text, re.MULTILINE)
        indent = loop.group(1)
        line_end = text.index("\n", text.index(CONSUME)) + 1
        return text[:line_end] + f"{indent}pid_m = consume_token(pid_m, _fence_acquire())\n" + text[line_end:]
    if name in ("vector-fence", "vector-acquire"):
        loop = re.search(r"^( *)for ovl_seg in range\((ovl_lo // (\d+)), ovl_end\):\n", text, re.MULTILINE)
        indent, first, seg = loop.group(1), loop.group(2), int(loop.group(3))
        rows = int(re.search(r"ovl_lo = tl\.minimum\(.*, (\d+)\)", text).group(1)) + 1
        width = 1 << max(0, (-(-rows // seg) - 1).bit_length())
        end = text.index("\n", text.index(CONSUME)) + 1
        body = text[loop.start() : end]
        if name == "vector-fence":
            read = "tl.load(ovl_sig_ptr + ovl_slots, mask=ovl_slots >= 0, other=0, volatile=True).to(tl.int32, bitcast=True)"
            token = "_fence_acquire()"
        else:
            read = "ld_acquire_sys(ovl_sig_ptr + tl.maximum(ovl_slots, 0))"
            token = "ovl_short"
        fast = (
            f"{indent}ovl_segs = {first} + tl.arange(0, {width})\n"
            f"{indent}ovl_slots = tl.load(ovl_wait0 + ovl_segs, mask=ovl_segs < ovl_end, other=-1)\n"
            f"{indent}ovl_seen = tl.where(ovl_slots >= 0, {read}, ovl_target)\n"
            f"{indent}ovl_short = tl.min(ovl_seen - ovl_target, axis=0)\n"
            f"{indent}if ovl_short < 0:\n"
            + "".join(f"    {line}\n" for line in body.splitlines())
            + f"{indent}pid_m = consume_token(pid_m, {token})\n"
        )
        return text[: loop.start()] + fast + text[end:]
    raise ValueError(name)


VARIANTS = ["emitted", "lazy-timer", "relaxed-fence", "vector-fence", "vector-acquire", "no-acquire", "no-wait"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--emitted", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("moe_wait_variants.py needs a CUDA GPU")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    mod = _load("p1_blocks_wv", BLOCKS)
    tmp = Path(tempfile.mkdtemp())
    rows = []
    for shape in part1.SHAPES:
        name, topk = shape[0], shape[5]
        _ids_np, ids, x, w, want = shape_inputs(shape, 8)
        row = {"shape": name, "check": {}, "errors": {}, "runs": []}
        cases, errs = [], []
        for cfg in PICKS[name]:
            src = args.emitted / "blocks" / name / cfg
            for v in VARIANTS:
                dst = tmp / v / name / cfg
                dst.mkdir(parents=True)
                for f in src.iterdir():
                    (dst / f.name).write_text(f.read_text())
                k = next(f for f in dst.glob("*.py") if not f.name.endswith("_routing.py"))
                k.write_text(variant(k.read_text(), v))
        for v in VARIANTS:
            for cname, fn, c, err in part1_emitted_cases(tmp / v / name, x, w, ids, sms):
                cases.append((cname.replace(f"p1 {v} emitted", f"p1 {v}"), fn, c))
                errs.append((cases[-1][0], err))
        keep = {c.replace("_", " ") for c in PICKS[name]}
        for cname, fn, c in plain_cases(mod, x, w, ids) + [
            (f"p1 {a}", b, c_) for a, b, c_ in fused_moe.cases(x, w, ids, a_div=topk, configs=CONFIGS)
        ]:
            if any(cname.endswith(k_) for k_ in keep):
                cases.append((cname, fn, c))
        good = without_wait_errors(row, part1.checked(row, cases, want, 0.02), errs)
        row["unheld"] = []
        for _ in range(args.runs):
            row["runs"].append(part1.time_cases(good, args.warmup, args.reps))
            row["unheld"].append(part1.time_cases(good, args.warmup, args.reps, lead_cycles=0))
        row["cases"] = {c: statistics.median(r[c] for r in row["runs"]) for c in row["runs"][0]}
        row["cases_unheld"] = {c: statistics.median(r[c] for r in row["unheld"]) for c in row["unheld"][0]}
        row["host_us"] = part1.host_enqueue_us(good)
        rows.append(row)
        print(f"{name}:   {'held (ms)':>10} {'not held':>10} {'host µs':>8}", flush=True)
        for c, ms in sorted(row["cases"].items(), key=lambda kv: kv[1]):
            print(f"   {c:48} {ms:8.4f} {row['cases_unheld'][c]:10.4f} {row['host_us'][c]:8.1f}", flush=True)
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(0), "triton": triton.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
