"""The compute kernels of ovl's operators on one GPU, beside cuBLAS in the same run.

Reads the `compute.json` that `packages/sim/scripts/compute-tables/emit-compute.ts` writes (shapes, and per
shape the kernel launches to time: plain built-in bodies at candidate configurations, or the
kernels compile() emitted with their waits/notifies and every signal already set), checks each
launch against an fp32 reference (output poisoned first: every element must be written), and
times it and `torch.matmul` (cuBLAS) with CUDA events, the L2 flushed before every repetition.

    PYTHONPATH=packages/runtime-py/src python3 packages/bench/gpu/compute_bench.py DIR --json OUT.json

A ``tune`` file (``emit-compute.ts tune``: per shape the candidates the runtime's on-device tuner times, the
table's pick first) is measured as the runtime's tuner measures, in sweeps (``ovl_runtime._tune.timing.sweeps``:
each launches cuBLAS and every candidate once, so a ratio within a sweep cancels clocks that drift); per shape the
pick is made as the runtime makes it (its own rule, ``ovl_runtime._tune.select.choose``) on the first half of the
sweeps and reported, with the table's pick, on the second half, so the reported gain carries no selection bias. A
shape may carry a ``reserve``: SMs left to another kernel (a GEMM+RS producer's push kernel), its grid
min(SMs - reserve, tiles); there cuBLASLt is also timed on the whole GPU and on the same SMs (torch's SM carveout).

Kernels are compiled first by a pool of processes (the Triton cache on disk is shared), so the
timed process only loads them.
"""

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
import zlib

import torch
import triton
from timer import FLUSH_BYTES, event_times, flush_buffer, gpu_state, stats


def load_kernel(base, case):
    path = os.path.join(base, case["file"])
    name = "ovl_compute_" + "".join(ch if ch.isalnum() else "_" for ch in case["file"])
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[name] = mod
    return getattr(mod, case["entry"])


def allocator(size, align, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def bind(case, a, b, c):
    """The kernel's arguments by name (every parameter but the constexprs), and its error buffer."""
    out, err = {}, None
    for arg in case["args"]:
        k, name = arg["kind"], arg["name"]
        if k in ("a", "b", "c"):
            out[name] = {"a": a, "b": b, "c": c}[k]
        elif k in ("int", "i64"):
            out[name] = arg["value"]
        elif k == "table":
            out[name] = torch.tensor(arg["values"], dtype=torch.int32, device="cuda")
        elif k == "signals":
            out[name] = torch.full((arg["size"],), arg["value"], dtype=torch.int32, device="cuda")
        elif k == "zeros":
            # Scratch the kernel keeps consistent itself (stream-K partials, tile counts).
            dtype = {"fp32": torch.float32, "int32": torch.int32}[arg["dtype"]]
            out[name] = torch.zeros(arg["size"], dtype=dtype, device="cuda")
        elif k == "error":
            err = torch.zeros(8, dtype=torch.int32, device="cuda")
            out[name] = err
        else:
            raise ValueError(f"unknown argument kind {k}")
    return out, err


_cubins = {}
_cluster_grids = {}


def cubin_launcher(base, case, a, b, c, sms):
    """A precompiled (TLX) case: its cubin loaded through the CUDA driver, launched on the
    current stream with the global scratch its metadata asks for (device TMA descriptors)."""
    from ovl_runtime._cubin.driver import CubinKernel, persistent_grid
    from ovl_runtime._cubin.metadata import load_metadata, scratch_bytes
    from ovl_runtime._runner.precompiled import driver

    path = os.path.join(base, case["cubin"])
    if path not in _cubins:
        meta = load_metadata(os.path.join(base, case["metadata"]))
        with open(path, "rb") as f:
            _cubins[path] = CubinKernel.load(driver(), f.read(), meta)
    kernel = _cubins[path]
    args, err = bind(case, a, b, c)
    for name in kernel.meta.aligned:
        v = args.get(name)
        if isinstance(v, int) and v % 16 != 0:
            raise ValueError(f"{name} = {v} is not a multiple of 16, as the cubin was compiled")
    # Persistent: for a cluster kernel no more clusters than the GPU holds at once.
    grid = persistent_grid(kernel, [min(sms, case["tiles"])], sms)
    cluster = kernel.meta.cluster_dims
    if cluster != (1, 1, 1) and path not in _cluster_grids:
        _cluster_grids[path] = grid
        print(f"  cluster {cluster}: grid {grid[0]} ({case['label']})", flush=True)
    scratch = {
        n: torch.empty(max(nbytes, 1), dtype=torch.uint8, device="cuda")
        for n, nbytes in scratch_bytes(kernel.meta, grid).items()
        if nbytes > 0
    }
    values = {k: (v.data_ptr() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
    values.update({n: t.data_ptr() for n, t in scratch.items()})

    def go():
        kernel.launch(grid, values, torch.cuda.current_stream().cuda_stream)

    # The launch holds raw addresses: keep the tensors behind them (tables, signals, scratch) alive with it.
    go.keep = (scratch, args)
    return go, err


def launcher(base, case, a, b, c, sms):
    if "cubin" in case:
        return cubin_launcher(base, case, a, b, c, sms)
    kernel = load_kernel(base, case)
    args, err = bind(case, a, b, c)
    cfg = case["config"]
    grid = (min(sms, case["tiles"]),)

    def go():
        kernel[grid](
            **args,
            **case["constexprs"],
            num_warps=cfg["numWarps"],
            num_stages=cfg["numStages"],
        )

    return go, err


def compile_one(job):
    """Pool worker: launch one case once at its shape, which compiles it into the shared cache."""
    base, shape, case = job
    try:
        triton.set_allocator(allocator)
        M, N, K = shape["M"], shape["N"], shape["K"]
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        go, _ = launcher(
            base,
            case,
            a,
            b,
            c,
            torch.cuda.get_device_properties(0).multi_processor_count,
        )
        t0 = time.time()
        go()
        torch.cuda.synchronize()
        return (case["file"], case["label"], None, time.time() - t0)
    except Exception as exc:  # noqa: BLE001 - a configuration that cannot compile is a result
        return (
            case["file"],
            case["label"],
            f"{type(exc).__name__}: {str(exc)[:300]}",
            0.0,
        )


def kernel_id(case):
    return json.dumps(
        [
            case["file"],
            case["entry"],
            case["constexprs"],
            case["config"]["numWarps"],
            case["config"]["numStages"],
        ]
    )


def timed(fn, flush, reps, warmup=2):
    """Times (ms) of `reps` runs of `fn`, CUDA events around each, L2 flushed before each (the one timer)."""
    return {"all": event_times(fn, reps, warmup=warmup, flush=flush)}


def measure_shape(base, shape, sms, flush, reps, rounds, failed, order="shuffled"):
    """Check every case once, then time cuBLAS and every case in `rounds` interleaved rounds of
    `reps` repetitions each (a GPU that heats up slows all of them alike), medians over all. With
    `order` "shuffled" each round visits cuBLAS and the cases in a fresh order (seeded by the shape's
    name), so no kernel keeps one place in the round; "fixed" times cuBLAS first, then the cases in
    the file's order, every round; "sweeps" times ``rounds`` x ``reps`` sweeps instead (``_swept``)."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    torch.manual_seed(zlib.crc32(shape["name"].encode()))
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    ref = torch.matmul(a.float(), b.float())
    ref_norm = float(ref.norm())
    flops = 2.0 * M * N * K
    c_cublas = torch.matmul(a, b)
    cublas_err = float((c_cublas.float() - ref).norm()) / ref_norm
    keys = (
        "label",
        "kind",
        "role",
        "source",
        "entry",
        "config",
        "warpSpecialization",
        "predictedMs",
        "modelRank",
    )
    # Programs of the persistent grid: the whole GPU, less what another kernel keeps (a push kernel's SMs).
    sms = sms - shape.get("reserve", 0)
    rows, runs = [], []
    for case in shape["cases"]:
        row = {k: case[k] for k in keys if k in case}
        rows.append(row)
        if kernel_id(case) in failed:
            row["error"] = failed[kernel_id(case)]
            continue
        try:
            go, err = launcher(base, case, a, b, c, sms)
            c.fill_(float("nan"))
            go()
            torch.cuda.synchronize()
            row["relErr"] = float((c.float() - ref).norm()) / ref_norm
            row["allWritten"] = not bool(torch.isnan(c).any())
            if err is not None and int(err[0]) != 0:
                row["waitError"] = err.tolist()
            runs.append((row, go))
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    del ref, c_cublas

    def cublas():
        torch.matmul(a, b, out=c)

    if order == "sweeps":
        return _swept(shape, sms, runs, rows, cublas, flops, cublas_err, a, b, reps * rounds)
    times = {id(row): [] for row, _ in runs}
    per_round = {id(row): [] for row, _ in runs}
    cublas_times, cublas_rounds, cublas_per_round = [], [], []
    rng = random.Random(zlib.crc32(shape["name"].encode()))
    members = [None, *runs]  # None: cuBLAS
    for _ in range(rounds):
        visit = members[:]
        if order == "shuffled":
            rng.shuffle(visit)
        for member in visit:
            if member is None:
                t = timed(cublas, flush, reps)
                cublas_per_round.append(t["all"])
                cublas_times += t.pop("all")
                cublas_rounds.append(t)
                continue
            row, go = member
            try:
                t = timed(go, flush, reps)["all"]
                times[id(row)] += t
                per_round[id(row)].append(t)
            except Exception as exc:  # noqa: BLE001
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    for row, _ in runs:
        if times[id(row)] and "error" not in row:
            row.update(stats(times[id(row)]))
            row["tflops"] = flops / row["ms"] / 1e9
            row["roundsMs"] = per_round[id(row)]
    cub = stats(cublas_times)
    return {
        **shape_fields(shape),
        "sms": sms,
        "flops": flops,
        "cublas": {
            **cub,
            "rounds": cublas_rounds,
            "roundsMs": cublas_per_round,
            "tflops": flops / cub["ms"] / 1e9,
            "relErr": cublas_err,
        },
        "cases": rows,
    }


def shape_fields(shape):
    """The shape's own fields a result carries."""
    keys = ("name", "op", "role", "mlp", "world", "M", "N", "K", "dtype", "reserve", "control", "table")
    return {k: shape[k] for k in keys if k in shape}


def cublas_lt(a, b, c, sms_left=None):
    """cuBLASLt (torch's other BLAS backend) at the same GEMM, optionally ``sms_left`` SMs fewer than the GPU's (torch's
    SM carveout, which its cuBLASLt path sets on each matmul's descriptor): the baseline of a kernel that leaves SMs
    to another. Both settings are restored after each call."""

    def go():
        before = torch.backends.cuda.preferred_blas_library()
        torch.backends.cuda.preferred_blas_library("cublaslt")
        torch._C._set_sm_carveout_experimental(sms_left)
        try:
            torch.matmul(a, b, out=c)
        finally:
            torch._C._set_sm_carveout_experimental(None)
            torch.backends.cuda.preferred_blas_library(before)

    return go


def _swept(shape, sms, runs, rows, cublas, flops, cublas_err, a, b, count):
    """The sweeps order: ``count`` sweeps, each launching cuBLAS and every case once (``ovl_runtime._tune.timing.sweeps``,
    the runtime tuner's own timer), so each case is compared with cuBLAS within a sweep and a GPU whose clocks drift
    moves both alike. A shape with a ``reserve`` also times cuBLAS on as many SMs as the case gets."""
    from ovl_runtime._tune.select import relative
    from ovl_runtime._tune.timing import sweeps

    members = [cublas, *(go for _, go in runs)]
    reserve = shape.get("reserve", 0)
    if reserve:
        c_lt = torch.empty(shape["M"], shape["N"], device="cuda", dtype=torch.bfloat16)
        members += [cublas_lt(a, b, c_lt), cublas_lt(a, b, c_lt, reserve)]
    times = sweeps(members, count)
    rel = relative(times)
    for (row, _), ts, r in zip(runs, times[1:], rel[1:]):
        row.update(stats(ts))
        row["tflops"] = flops / row["ms"] / 1e9
        row["sweepsMs"] = ts
        row["ratio"] = None if r is None else 1 / r
    cub = stats(times[0])
    out = {
        **shape_fields(shape),
        "sms": sms,
        "flops": flops,
        "cublas": {**cub, "sweepsMs": times[0], "tflops": flops / cub["ms"] / 1e9, "relErr": cublas_err},
        "cases": rows,
    }
    if reserve:
        # cuBLASLt on the whole GPU and on the SMs the case gets: what the carveout costs it, as it measured.
        whole, same = times[-2], times[-1]
        out["cublasLt"] = {**stats(whole), "sweepsMs": whole}
        out["cublasSameSms"] = {**stats(same), "sweepsMs": same, "sms": sms, "overLtWholeGpu": relative([whole, same])[1]}
    return out


def ok_cases(r):
    return [c for c in r["cases"] if "ms" in c and c.get("allWritten") and c["relErr"] < 2e-2 and "waitError" not in c]


def summary_bench(result):
    """Per shape: cuBLAS, the tuned emitted kernel (with waits), its plain body, the previous default."""
    print(
        f"{'shape':12s} {'cuBLAS':>7s} {'tuned':>6s} {'ratio':>6s} {'plain':>6s} {'w/o÷w':>6s} {'prev':>6s} {'alt':>6s} {'tlx':>6s} {'tlxE':>6s}  TFLOP/s; ratio = cuBLAS ms / tuned ms; tlx: best plain TLX GEMM, tlxE: best TLX backend kernel"
    )
    ratios, tlx_ratios, best_ratios = [], [], []
    for r in result["shapes"]:
        by_role = {}
        for c in ok_cases(r):
            if c.get("role") not in by_role or c["ms"] < by_role[c["role"]]["ms"]:
                by_role[c["role"]] = c
        t, p = by_role.get("tuned"), by_role.get("tuned-plain")
        prev, alt = by_role.get("previous"), by_role.get("alternative")
        tlx, tlx_e = by_role.get("tlx"), by_role.get("tlx-emitted")
        cub = r["cublas"]["ms"]
        if t is None:
            print(f"{r['name']:12s} tuned kernel missing or wrong")
            continue
        ratios.append(cub / t["ms"])
        if tlx_e is not None:
            tlx_ratios.append(cub / tlx_e["ms"])
            best_ratios.append(cub / min(t["ms"], tlx_e["ms"]))
        print(
            f"{r['name']:12s} {r['cublas']['tflops']:7.0f} {t['tflops']:6.0f} {cub / t['ms']:6.3f} "
            f"{p['tflops'] if p else float('nan'):6.0f} {p['ms'] / t['ms'] if p else float('nan'):6.3f} "
            f"{cub / prev['ms'] if prev else float('nan'):6.3f} {cub / alt['ms'] if alt else float('nan'):6.3f} "
            f"{cub / tlx['ms'] if tlx else float('nan'):6.3f} {cub / tlx_e['ms'] if tlx_e else float('nan'):6.3f}"
            + (f"  {tlx_e['label'][len('tlx emitted ') :]}" if tlx_e else "")
        )
    if ratios:
        print(
            f"tuned emitted vs cuBLAS: geometric mean {statistics.geometric_mean(ratios):.3f}, "
            f"min {min(ratios):.3f}, below 0.95: {sum(x < 0.95 for x in ratios)} of {len(ratios)}"
        )
    for what, rs in (
        ("best TLX backend kernel", tlx_ratios),
        ("faster of tuned and TLX backend", best_ratios),
    ):
        if rs:
            print(
                f"{what} vs cuBLAS: geometric mean {statistics.geometric_mean(rs):.3f}, "
                f"min {min(rs):.3f}, below 0.95: {sum(x < 0.95 for x in rs)} of {len(rs)}"
            )


def method(args):
    """The timing method, in words, for the results file."""
    launch = f"CUDA events around one launch, L2 flushed ({FLUSH_BYTES >> 20} MiB written) before each"
    if args.order == "sweeps":
        return (
            f"{launch}; {args.reps * args.rounds} sweeps after 2 warm-up sweeps, each launching cuBLAS and every case of a "
            "shape once in an order rotated by one per sweep; ratios within a sweep, medians over the sweeps"
        )
    order = "each in a fresh seeded order" if args.order == "shuffled" else "cuBLAS first, then the cases in order"
    return (
        f"{launch} repetition; {args.rounds} interleaved round(s) over cuBLAS and every case of a shape ({order}), "
        f"{args.reps} repetitions each after 2 warm-ups; median over all repetitions"
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json", required=True)
    ap.add_argument("--reps", type=int, default=15, help="repetitions per round")
    ap.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="interleaved rounds over cuBLAS and the cases (default 1; a tune file: 4, half to pick, half to report)",
    )
    ap.add_argument(
        "--order",
        choices=("shuffled", "fixed", "sweeps"),
        default=None,
        help="each round's order of cuBLAS and the cases: fresh per round, or cuBLAS first then the file's order; or "
        "sweeps (a tune file's default): reps x rounds sweeps, each launching cuBLAS and every case once, compared within it",
    )
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument(
        "--budget-s",
        type=float,
        default=420,
        help="stop measuring new shapes after this many seconds",
    )
    args = ap.parse_args()
    t_start = time.time()
    with open(os.path.join(args.dir, "compute.json")) as f:
        bench = json.load(f)
    if args.rounds is None:
        args.rounds = 4 if bench["mode"] == "tune" else 1
    if args.order is None:
        args.order = "sweeps" if bench["mode"] == "tune" else "shuffled"
    if bench["mode"] == "tune" and args.rounds < 2:
        sys.exit("a tune file needs --rounds >= 2: the pick is made on half of the rounds and reported on the other half")
    base = os.path.abspath(args.dir)
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    # 1. Compile every distinct kernel once, in parallel.
    jobs, seen = [], set()
    for shape in bench["shapes"]:
        for case in shape["cases"]:
            kid = kernel_id(case)
            if "cubin" not in case and kid not in seen:
                seen.add(kid)
                jobs.append((base, shape, case))
    ctx = mp.get_context("spawn")
    failed = {}
    with ctx.Pool(max(1, min(args.workers, len(jobs)))) as pool:
        for file, label, error, _ in pool.imap_unordered(compile_one, jobs):
            if error is not None:
                failed_case = next(c for s in bench["shapes"] for c in s["cases"] if c["file"] == file and c["label"] == label)
                failed[kernel_id(failed_case)] = error
                print(f"compile failed: {file} {label}: {error[:160]}", flush=True)
    t_compiled = time.time()
    print(
        f"compiled {len(jobs)} kernels in {t_compiled - t_start:.1f} s ({len(failed)} failed)",
        flush=True,
    )
    # 2. Check and time, shape by shape.
    triton.set_allocator(allocator)
    flush = flush_buffer()
    result = {
        "schema": "ovl.compute-results/v1",
        "mode": bench["mode"],
        # The GPU the kernels were emitted for (emit-compute.ts --target), when recorded.
        **{k: bench[k] for k in ("target", "tables") if k in bench},
        "device": torch.cuda.get_device_name(),
        "sms": sms,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "gpuStateBefore": gpu_state(),
        "method": method(args),
        "order": args.order,
        "compileSeconds": t_compiled - t_start,
        "shapes": [],
        "skipped": [],
    }
    for shape in bench["shapes"]:
        if time.time() - t_start > args.budget_s:
            result["skipped"].append(shape["name"])
            continue
        r = measure_shape(base, shape, sms, flush, args.reps, args.rounds, failed, args.order)
        torch.cuda.empty_cache()
        result["shapes"].append(r)
        ok = ok_cases(r)
        best = min(ok, key=lambda c: c["ms"]) if ok else None
        bad = [c["label"] for c in r["cases"] if "ms" in c and c not in ok]
        print(
            f"{r['name']:12s} cuBLAS {r['cublas']['ms']:.4f} ms  best {best['ms'] if best else float('nan'):.4f} "
            f"({r['cublas']['ms'] / best['ms'] if best else 0:.3f}x) {best['label'] if best else '-'}"
            + (f"  WRONG: {bad[:3]}" if bad else ""),
            flush=True,
        )
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    result["gpuStateAfter"] = gpu_state()
    result["seconds"] = time.time() - t_start
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    # 3. The short table, last.
    print(f"\n{result['device']} torch {result['torch']} triton {result['triton']}  {result['seconds']:.0f} s")
    if bench["mode"] == "bench":
        summary_bench(result)
        return
    if bench["mode"] == "tune":
        from tune_summary import summary_tune

        result["tune"] = summary_tune(result)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        return
    print(f"{'shape':12s} {'cuBLAS TF/s':>11s} {'best TF/s':>9s} {'ratio':>6s}  config")
    ratios = []
    for r in result["shapes"]:
        best = min(ok_cases(r), key=lambda c: c["ms"], default=None)
        if best is None:
            continue
        ratio = r["cublas"]["ms"] / best["ms"]
        ratios.append(ratio)
        print(f"{r['name']:12s} {r['cublas']['tflops']:11.0f} {best['tflops']:9.0f} {ratio:6.3f}  {best['label']}")
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"geometric mean vs cuBLAS {geo:.3f}, min {min(ratios):.3f} over {len(ratios)} shapes; skipped {result['skipped']}")


if __name__ == "__main__":
    main()
