"""GEMM+RS producer notify variants, hand-derived from the emitted producers of an `emit-compute.ts tune` dir.

    python3 notify_variants.py prepare TUNE_DIR OUT_DIR     # no GPU: the variants and their compute.json
    python3 notify_variants.py ab OLD_TUNE NEW_TUNE OUT_DIR [NEWEST_TUNE]   # no GPU: as emitted before / after
    python3 notify_variants.py check OUT_DIR                 # GPU: every variant's final signal counts equal the emitted one's
    python3 notify_variants.py report RESULT.json            # the table

Variants of each rs shape's table pick (case c0):
  tile-sys  as emitted: after the tile's stores, wait for them written, bar.sync, release-add at system scope
  tile-gpu  the same at gpu scope (as the torch API's producer beside its SM push kernel)
  plain     no notify (the body's ceiling)
  k<D>[-how] tile i's notify issued at K step min(D, k_tiles-1) of the program's next tile (gpu scope), its wait then
            long done; the last tile's after the tile loop. The wait and barrier run only where the notify is due
            (a predicated inline asm), so other K steps pay one compare. -relaxed: a relaxed add (no fence; diagnostic,
            not ordered); -nobar: no barrier (diagnostic); -tma: the add as a TMA reduce-add, out of bounds when not due.
  k4-asm<t>[-sys]: the wait, barrier and release add in one predicated inline asm, the add by thread t (0: the
            thread Triton issues TMA from; 32: a thread of another warp); tile-asm32: the same at the tile.
  plain-asm the predicated wait and barrier at K step 4 of every tile, no notify (diagnostic: their cost alone)
"""
import json
import os
import re
import shutil
import sys

WAIT = {
    "bar": "{ .reg .pred p; setp.ne.b32 p, $1, 0; @p cp.async.bulk.wait_group 0; @p bar.sync 0; mov.b32 $0, 0; }",
    "nobar": "{ .reg .pred p; setp.ne.b32 p, $1, 0; @p cp.async.bulk.wait_group 0; mov.b32 $0, 0; }",
}


def asm_helper(tid, scope):
    """The wait, barrier and release add in one predicated inline asm, the add by thread `tid` only."""
    asm = (
        "{ .reg .pred p, q; .reg .u32 t; setp.ne.b32 p, $1, 0; @p cp.async.bulk.wait_group 0; @p bar.sync 0; "
        f"mov.u32 t, %tid.x; setp.eq.and.u32 q, t, {tid}, p; @q red.release.{scope}.global.add.s32 [$2], 1; mov.b32 $0, 0; }}"
    )
    return (
        "\n\n@triton.jit\ndef ovl_notify_when(sig_ptr, slot, when):\n"
        f'    tl.inline_asm_elementwise("{asm}", "=r,r,l", [when.to(tl.int32), (sig_ptr + slot).to(tl.int64, bitcast=True)], '
        "dtype=tl.int32, is_pure=False, pack=1)\n"
    )


def helper(wait="bar", sem="release", tma=False, atomic=True, tid=None, scope="gpu"):
    if tid is not None:
        return asm_helper(tid, scope)
    body = (
        f'    tl.inline_asm_elementwise("{WAIT[wait]}", "=r,r", [when.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)\n'
    )
    if tma:
        body += (
            "    r = slot % 4\n"
            "    at = tl.where(when, slot - r, OOB)\n"
            "    sig_desc.atomic_add([at], (tl.arange(0, 4) == r).to(tl.int32))\n"
        )
        head = "def ovl_notify_when(sig_desc, slot, when, OOB: tl.constexpr):\n"
    else:
        head = "def ovl_notify_when(sig_ptr, slot, when):\n"
        if atomic:
            body += f'    tl.atomic_add(sig_ptr + slot, 1, mask=when, sem="{sem}", scope="gpu")\n'
    return "\n\n@triton.jit\n" + head + body


def variant(src, name, case_args=()):
    notify = re.search(r"^(\s*)notify_slot\(ovl_sig_ptr, (ovl_slot0), ovl_slot0 >= 0\)\n", src, re.M)
    assert notify, "no notify line"
    if name == "tile-sys":
        return src
    if name == "tile-gpu":
        src = src.replace("import notify_slot\n", "import notify_slot_gpu\n")
        return src.replace("    notify_slot(ovl_sig_ptr", "    notify_slot_gpu(ovl_sig_ptr")
    if name == "plain":
        return src[: notify.start()] + src[notify.end():]
    if name == "tile-asm32":
        ind = notify.group(1)
        src = src[: notify.start()] + f"{ind}ovl_notify_when(ovl_sig_ptr, ovl_slot0, ovl_slot0 >= 0)\n" + src[notify.end():]
        src = src.replace("from ovl_runtime.language import notify_slot\n", "")
        at = src.index("\n\n@triton.jit")
        return src[:at] + asm_helper(32, "gpu") + src[at:]
    if name == "plain-asm":
        src = src[: notify.start()] + src[notify.end():]
        kl = re.search(r"^(\s*)for ki in range\(k_tiles\):\n", src, re.M)
        ki = kl.group(1) + "    "
        src = src[: kl.end()] + f"{ki}ovl_notify_when(ovl_sig_ptr, 0, ki == min(4, k_tiles - 1))\n" + src[kl.end():]
        src = src.replace("from ovl_runtime.language import notify_slot\n", "")
        at = src.index("\n\n@triton.jit")
        return src[:at] + helper(atomic=False) + src[at:]
    d, _, how = name[1:].partition("-")
    d = int(d)
    ind = notify.group(1)
    src = src[: notify.start()] + (
        f"{ind}ovl_notify_when(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0)\n{ind}ovl_prev0 = ovl_slot0\n"
    ) + src[notify.end():]
    loop = re.search(r"^(\s*)for tile_id in .*\n", src, re.M)
    src = src[: loop.start()] + f"{loop.group(1)}ovl_prev0 = -1\n" + src[loop.start():]
    kl = re.search(r"^(\s*)for ki in range\(k_tiles\):\n", src, re.M)
    ki = kl.group(1) + "    "
    add = (
        f"{ki}ovl_due = (ki == min({d}, k_tiles - 1)) & (ovl_prev0 >= 0)\n"
        f"{ki}ovl_notify_when(ovl_sig_ptr, ovl_prev0, ovl_due)\n"
        f"{ki}ovl_prev0 = tl.where(ovl_due, -1, ovl_prev0)\n"
    )
    src = src[: kl.end()] + add + src[kl.end():]
    # after the tile loop (the kernel's last statement): the last tile's notify
    src = src.rstrip("\n") + f"\n{loop.group(1)}ovl_notify_when(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0)\n"
    src = src.replace("from ovl_runtime.language import notify_slot\n", "")
    if how == "tma":
        size = next(a["size"] for a in case_args if a["name"] == "ovl_sig_ptr")
        oob = -(-size // 4) * 4
        src = src.replace("ovl_notify_when(ovl_sig_ptr, ovl_prev0,", f"ovl_notify_when(ovl_sig_desc, ovl_prev0,")
        src = re.sub(r"(ovl_notify_when\(ovl_sig_desc, [^\n]*)\)\n", lambda m: m.group(1) + f", {oob})\n", src)
        src = src.replace("    ovl_prev0 = -1\n", f"    ovl_sig_desc = tl.make_tensor_descriptor(ovl_sig_ptr, shape=[{size}], strides=[1], block_shape=[4])\n    ovl_prev0 = -1\n", 1)
    kw = {"": {}, "relaxed": {"sem": "relaxed"}, "nobar": {"wait": "nobar"}, "tma": {"tma": True},
          "asm0": {"tid": 0}, "asm32": {"tid": 32}, "asm32-sys": {"tid": 32, "scope": "sys"}}[how]
    at = src.index("\n\n@triton.jit")
    return src[:at] + helper(**kw) + src[at:]


VARIANTS = ("tile-gpu", "plain", "k4", "k4-relaxed", "tile-asm32", "k4-asm0", "k4-asm32", "k4-asm32-sys")


def prepare(tune, out):
    bench = json.load(open(os.path.join(tune, "compute.json")))
    os.makedirs(os.path.join(out, "v"), exist_ok=True)
    shapes = []
    for shape in bench["shapes"]:
        if shape["op"] != "gemm-rs":
            continue
        c0 = shape["cases"][0]
        src = open(os.path.join(tune, c0["file"])).read()
        cases = []
        for v in VARIANTS:
            stem = os.path.basename(c0["file"])[:-3]
            f = f"v/{stem}_{v.replace('-', '_')}.py"
            with open(os.path.join(out, f), "w") as fh:
                fh.write(variant(src, v, c0["args"]))
            cases.append({**c0, "label": f"{v} {c0['label'].split(' ', 1)[1]}", "file": f})
        shapes.append({**shape, "cases": cases})
    json.dump({**bench, "shapes": shapes}, open(os.path.join(out, "compute.json"), "w"), indent=1)
    print(f"{len(shapes)} shapes x {len(VARIANTS)} variants -> {out}")


COUNT_HELPER = '''

@triton.jit
def ovl_notify_count_if(sig_ptr, slot, count, cond):
    tl.inline_asm_elementwise(
        "{ .reg .pred p, q; .reg .u32 t; setp.ne.b32 p, $1, 0; @p cp.async.bulk.wait_group 0; @p bar.sync 0; "
        "mov.u32 t, %tid.x; setp.eq.and.u32 q, t, 0, p; @q red.release.SCOPE.global.add.s32 [$2], $3; mov.b32 $0, 0; }",
        "=r,r,l,r", [tl.cast(cond, tl.int32), tl.cast(sig_ptr + slot, tl.int64, bitcast=True), count],
        dtype=tl.int32, is_pure=False, pack=1)
'''


def coalesce(src, scope):
    """The emitted next-tile producer (one slot column) with runs of a program's tiles on the same slot notified as one
    add of their count: tile i's notify is skipped where the program's next tile has the same slot (that tile ends
    later, so the slot completes when it did) and its count carried on."""
    slot = re.search(r"^(\s*)ovl_slot0 = (.*)\n", src, re.M)
    expr = slot.group(2)
    k = re.search(r"^(\s*)ovl_k = 0\n", src, re.M)
    src = src[: k.start()] + f"{k.group(1)}ovl_next0 = {expr}\n" + src[k.start():]
    src = src.replace("    ovl_prev0 = -1\n", "    ovl_prev0 = -1\n    ovl_cnt0 = 0\n", 1)
    ind = k.group(1) + "    "
    src = src.replace(
        f"{ind}ovl_due0 = (ovl_k == 1) & (ovl_prev0 >= 0)\n"
        f"{ind}notify_slot_if(ovl_sig_ptr, ovl_prev0, ovl_due0)\n"
        f"{ind}ovl_prev0 = tl.where(ovl_due0, -1, ovl_prev0)\n",
        f"{ind}ovl_due0 = (ovl_k == 1) & (ovl_prev0 >= 0) & (ovl_prev0 != ovl_next0)\n"
        f"{ind}ovl_notify_count_if(ovl_sig_ptr, ovl_prev0, ovl_cnt0, ovl_due0)\n"
        f"{ind}ovl_prev0 = tl.where(ovl_due0, -1, ovl_prev0)\n"
        f"{ind}ovl_cnt0 = tl.where(ovl_due0, 0, ovl_cnt0)\n",
    )
    i = k.group(1)
    src = src.replace(
        f"{i}ovl_slot0 = {expr}\n{i}notify_slot_if(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0)\n{i}ovl_prev0 = ovl_slot0\n",
        f"{i}ovl_slot0 = ovl_next0\n"
        f"{i}ovl_flush0 = (ovl_prev0 >= 0) & (ovl_prev0 != ovl_slot0)\n"
        f"{i}ovl_notify_count_if(ovl_sig_ptr, ovl_prev0, ovl_cnt0, ovl_flush0)\n"
        f"{i}ovl_cnt0 = tl.where(ovl_slot0 >= 0, tl.where(ovl_prev0 == ovl_slot0, ovl_cnt0, 0) + 1, 0)\n"
        f"{i}ovl_prev0 = ovl_slot0\n",
    )
    src = src.replace(
        "\n    notify_slot_if(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0)\n",
        "\n    ovl_notify_count_if(ovl_sig_ptr, ovl_prev0, ovl_cnt0, ovl_prev0 >= 0)\n",
    )
    src = src.replace("from ovl_runtime.language import notify_slot_if\n", "")
    assert "notify_slot_if" not in src, "a notify left unconverted"
    at = src.index("\n\n@triton.jit")
    return src[:at] + COUNT_HELPER.replace("SCOPE", scope) + src[at:]


def prepare_ab(old, new, out, newest=None):
    """The producer as emitted before (notify at the tile) and after (at K step 1 of the next tile), each at system
    and gpu scope, and the plain body, per rs shape: the table pick (case c0) of two `emit-compute.ts tune` dirs.
    With `newest` (a third dir, whose producers notify a program's runs on one slot as one add): its producers as
    emitted (`emit-*`), and not the hand-made `coal-*`."""
    bench_old = json.load(open(os.path.join(old, "compute.json")))
    bench_new = {s["name"]: s for s in json.load(open(os.path.join(new, "compute.json")))["shapes"]}
    bench_newest = None if newest is None else {s["name"]: s for s in json.load(open(os.path.join(newest, "compute.json")))["shapes"]}
    os.makedirs(os.path.join(out, "v"), exist_ok=True)
    shapes = []
    for shape in bench_old["shapes"]:
        if shape["op"] != "gemm-rs":
            continue
        c_old, c_new = shape["cases"][0], bench_new[shape["name"]]["cases"][0]
        assert c_old["label"] == c_new["label"], (c_old["label"], c_new["label"])
        src_old = open(os.path.join(old, c_old["file"])).read()
        src_new = open(os.path.join(new, c_new["file"])).read()
        assert "notify_slot_if(" in src_new and "notify_slot(" in src_old
        texts = {
            "tile-sys": src_old,
            "tile-gpu": variant(src_old, "tile-gpu"),
            "next-sys": src_new,
            "next-gpu": src_new.replace("notify_slot_if", "notify_slot_gpu_if"),
            "plain": variant(src_old, "plain"),
        }
        if bench_newest is None:
            texts["coal-sys"] = coalesce(src_new, "sys")
            texts["coal-gpu"] = coalesce(src_new, "gpu")
        else:
            c3 = bench_newest[shape["name"]]["cases"][0]
            assert c3["label"] == c_old["label"], (c3["label"], c_old["label"])
            src3 = open(os.path.join(newest, c3["file"])).read()
            assert "ovl_cnt0" in src3
            texts["emit-sys"] = src3
            texts["emit-gpu"] = src3.replace("notify_slot_if", "notify_slot_gpu_if")
        cases = []
        stem = os.path.basename(c_old["file"])[:-3]
        for v, text in texts.items():
            f = f"v/{stem}_{v.replace('-', '_')}.py"
            with open(os.path.join(out, f), "w") as fh:
                fh.write(text)
            cases.append({**c_old, "label": f"{v} {c_old['label'].split(' ', 1)[1]}", "file": f})
        shapes.append({**shape, "cases": cases})
    json.dump({**bench_old, "shapes": shapes}, open(os.path.join(out, "compute.json"), "w"), indent=1)
    print(f"{len(shapes)} shapes x {len(texts)} cases -> {out}")


def check(out):
    import torch
    import triton

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compute_bench import allocator, bind, load_kernel

    triton.set_allocator(allocator)
    bench = json.load(open(os.path.join(out, "compute.json")))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    bad = 0
    for shape in bench["shapes"]:
        M, N, K = shape["M"], shape["N"], shape["K"]
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        ref = None
        for case in shape["cases"]:
            if case["label"].startswith("plain") or case["label"].split(" ")[0] in ("k4-relaxed", "k4-nobar", "k4-asm0"):
                continue
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            args, _ = bind(case, a, b, c)
            sig = next(v for k, v in args.items() if k == "ovl_sig_ptr")
            sig.zero_()
            kern = load_kernel(out, case)
            grid = (min(sms - shape.get("reserve", 0), case["tiles"]),)
            kern[grid](**args, **case["constexprs"], num_warps=case["config"]["numWarps"], num_stages=case["config"]["numStages"])
            torch.cuda.synchronize()
            got = (sig.clone(), c.clone())
            if ref is None:
                ref = got
            same_sig = bool(torch.equal(got[0], ref[0]))
            same_c = bool(torch.equal(got[1], ref[1]))
            bad += not (same_sig and same_c)
            print(f"{shape['name']:34s} {case['label'].split(' ')[0]:9s} signals {'=' if same_sig else 'DIFFER'} "
                  f"(sum {int(got[0].sum())}) output {'=' if same_c else 'DIFFER'}", flush=True)
    print("check:", "all equal" if bad == 0 else f"{bad} differ")


def report(path):
    r = json.load(open(path))
    names = [c["label"].split(" ")[0] for c in r["shapes"][0]["cases"]]
    print(f"{r['device']} torch {r['torch']} triton {r['triton']}; cuBLAS ms / variant ms within a sweep, median")
    print(f"{'shape':40s} {'K':>5s} " + " ".join(f"{n:>8s}" for n in names))
    import math
    cols = {n: [] for n in names}
    for s in r["shapes"]:
        vals = []
        for c in s["cases"]:
            n = c["label"].split(" ")[0]
            x = c.get("ratio")
            ok = c.get("allWritten") and c.get("relErr", 1) < 2e-2 and x is not None
            vals.append(f"{x:8.3f}" if ok else f"{'ERR':>8s}")
            if ok and not s.get("control"):
                cols[n].append(x)
        tag = s["name"] + ("_push" if s.get("reserve") and not s["name"].endswith("_push") else "") + (" [ctl]" if s.get("control") else "")
        print(f"{tag:40s} {s['K']:5d} " + " ".join(vals))
    print(f"{'off-table geometric mean':40s} {'':5s} " + " ".join(
        f"{math.exp(sum(map(math.log, v)) / len(v)):8.3f}" if v else f"{'-':>8s}" for v in cols.values()))
    print(f"{'off-table min':40s} {'':5s} " + " ".join(f"{min(v):8.3f}" if v else f"{'-':>8s}" for v in cols.values()))


if __name__ == "__main__":
    {"prepare": lambda: prepare(sys.argv[2], sys.argv[3]), "ab": lambda: prepare_ab(sys.argv[2], sys.argv[3], sys.argv[4], *sys.argv[5:6]), "check": lambda: check(sys.argv[2]),
     "report": lambda: report(sys.argv[2])}[sys.argv[1]]()
