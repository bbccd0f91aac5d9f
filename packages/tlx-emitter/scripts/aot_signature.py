"""What both AOT checks (aot-compile.py, upstream triton; tlx-aot-compile.py, fbtriton) need
from a manifest: the Triton signature type of each kernel argument, the divisibility the
runner guarantees, the kernel's `@triton.jit` function loaded from its source file, and the
`ASTSource` built from them (`kernel_source`). Imports no triton (the caller passes its
module), so either venv can use it.
"""
import importlib.util
import os
import re

POINTER = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32", "int32": "*i32", "uint32": "*u32", "int64": "*i64"}
SCALAR = {"int": "i32", "rows": "i32", "rank": "i32", "world": "i32", "epoch": "i32", "epoch-target": "i32", "timeout-ns": "i64"}


# Programs a `num-sms` grid resolves to when compiled ahead of time for sm_90a (H100/H200).
AOT_SMS = 132


def grid_programs(kernel):
    """The first grid dimension as the runner would resolve it on a 132-SM Hopper GPU."""
    g = kernel["grid"][0]
    if isinstance(g, int):
        return g
    n = max(1, AOT_SMS - g.get("reserve", 0))
    return min(n, g["cap"]) if "cap" in g else n


def arg_type(arg, buffers, tables):
    """The Triton signature type of a manifest argument (buffers by dtype, tables, ints...)."""
    kind = arg["kind"]
    if kind == "num-programs":
        return "constexpr"
    if kind == "buffer":
        return POINTER[buffers[arg["name"]]["dtype"]]
    if kind == "table":
        return "*i64" if tables[arg["name"]]["dtype"] == "int64" else "*i32"
    if kind == "peer-pointers":
        return "*i64"
    if kind in ("error-buffer", "epoch-word"):
        return "*i32"
    return SCALAR[kind]


def load_entry(path, entry, prefix):
    """The function `entry` of the module at `path`, imported under a name unique to the path."""
    name = prefix + re.sub(r"\W", "_", os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, entry)


def aligned_args(kernel, signature):
    """The arguments the runner's launches make 16-byte divisible, as Triton's JIT would
    specialise them: every pointer (whole allocations and tables), and every `int` argument
    whose manifest value is a multiple of 16. Scalars that change per launch (rank, epoch,
    targets) are never assumed."""
    out = []
    for a in kernel["args"]:
        t = signature[a["name"]]
        v = a["value"]
        if t == "constexpr":
            continue
        if t.startswith("*") or (v["kind"] == "int" and isinstance(v.get("value"), int) and v["value"] % 16 == 0):
            out.append(a["name"])
    return out


def divisibility_attrs(fn, names):
    """ASTSource `attrs` marking `names` (parameters of `fn`) divisible by 16."""
    return {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in names}


def kernel_source(triton, base, kernel, buffers, tables, prefix):
    """What `triton.compile` takes for a manifest kernel compiled as the runner's launches run
    it: the `ASTSource` (signature from the argument kinds, constexprs, the JIT's divisibility
    of `aligned_args`), with the signature and the aligned names. `triton` is the caller's
    module (upstream or the fork), `base` the manifest's folder, `prefix` the module-name prefix."""
    fn = load_entry(os.path.join(base, kernel["source"]), kernel["entry"], prefix)
    signature = {a["name"]: arg_type(a["value"], buffers, tables) for a in kernel["args"]}
    signature.update({c: "constexpr" for c in kernel["constexprs"]})
    constexprs = dict(kernel["constexprs"])
    # A body's persistent stride (`NUM_SMS`) is the launch grid: a constexpr the runner fills.
    constexprs.update({a["name"]: grid_programs(kernel) for a in kernel["args"] if a["value"]["kind"] == "num-programs"})
    aligned = aligned_args(kernel, signature)
    src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=divisibility_attrs(fn, aligned))
    return src, signature, aligned
