"""One compute configuration of an operator's GEMM, named explicitly (a :class:`~ovl_runtime._kernels.library.KernelKey`'s
``config``): the built-in body variant, the tile, the L2 grouping, the pipeline stages and the warps. Without one a
key compiles what the tuned table picks; with one it compiles exactly this (``ovl emit --tile --group-m --num-warps
--num-stages --body``), which is how the on-device tuner compiles its candidates. Pure Python: no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError

#: Operators a configuration may be named for: those whose compute a tuned table decides and whose bodies the
#: compiler's compute model prices (``ovl candidates`` answers for them).
CONFIG_OPERATORS = ("ag-gemm", "gemm-rs")

_BODY = re.compile(r"^[a-z][a-z0-9_]*$")


def _pow2(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi and v & (v - 1) == 0


@dataclass(frozen=True)
class ComputeConfig:
    """A GEMM configuration: ``body`` (a built-in body of the operator's family, e.g. ``gemm_tma_persistent_flat``),
    tile ``bm × bn × bk``, ``group_m``, ``stages`` and ``warps``. The compiler checks that the body belongs to the
    operator and that the tile fits its plan; this checks what the directory name and the flags need."""

    body: str
    bm: int
    bn: int
    bk: int
    group_m: int
    stages: int
    warps: int

    def __post_init__(self) -> None:
        if not isinstance(self.body, str) or not _BODY.match(self.body):
            raise UsageError(f"compute config: body {self.body!r} is not a body name (lower case, digits, underscores)")
        for name in ("bm", "bn", "bk"):
            if not _pow2(getattr(self, name), 16, 256):
                raise UsageError(f"compute config: {name} must be a power of two in 16..256, got {getattr(self, name)!r}")
        if not _pow2(self.warps, 1, 16):
            raise UsageError(f"compute config: warps must be a power of two up to 16, got {self.warps!r}")
        for name, hi in (("group_m", 64), ("stages", 8)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= hi:
                raise UsageError(f"compute config: {name} must be an integer in 1..{hi}, got {v!r}")

    @property
    def tag(self) -> str:
        """Its part of a kernel directory's name: ``gemm_tma_persistent_flat-128x256x64-g4-s3-w8``."""
        return f"{self.body}-{self.bm}x{self.bn}x{self.bk}-g{self.group_m}-s{self.stages}-w{self.warps}"

    @property
    def label(self) -> str:
        """As the compiler names it (``computeKey``): ``gemm_tma_persistent_flat 128x256x64 g4 s3 w8``."""
        return f"{self.body} {self.bm}x{self.bn}x{self.bk} g{self.group_m} s{self.stages} w{self.warps}"

    def cli_flags(self) -> list[str]:
        """The ``ovl emit`` flags that compile exactly this configuration."""
        return [
            "--tile",
            f"{self.bm}x{self.bn}x{self.bk}",
            "--group-m",
            str(self.group_m),
            "--num-warps",
            str(self.warps),
            "--num-stages",
            str(self.stages),
            "--body",
            self.body,
        ]

    def to_json(self) -> dict[str, Any]:
        """As the compiler writes a configuration (``ovl candidates --json``, the tuned tables)."""
        return {
            "body": self.body,
            "BM": self.bm,
            "BN": self.bn,
            "BK": self.bk,
            "groupM": self.group_m,
            "numStages": self.stages,
            "numWarps": self.warps,
        }

    @staticmethod
    def from_json(d: Any) -> ComputeConfig:
        """The configuration of a compiler-written object. @raises UsageError for anything else."""
        if not isinstance(d, dict):
            raise UsageError(f"compute config: expected an object, got {type(d).__name__}")
        try:
            return ComputeConfig(d["body"], d["BM"], d["BN"], d["BK"], d["groupM"], d["numStages"], d["numWarps"])
        except KeyError as exc:
            raise UsageError(f"compute config: missing {exc.args[0]!r}") from exc


def compute_kernel_config(kernels: Any) -> ComputeConfig | None:
    """The configuration the compute kernel of a loaded manifest's ``kernels`` realises (its body, constexprs and
    launch), or None where it has no transformed GEMM body (``local-consumer`` / ``local-producer``)."""
    for k in kernels:
        if k.template_kind in ("local-consumer", "local-producer"):
            c, body = k.constexprs, str(k.template_params.get("body", "")).removesuffix(".py")
            try:
                return ComputeConfig(body, c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["GROUP_M"], k.num_stages, k.num_warps)
            except (KeyError, UsageError):
                return None
    return None
