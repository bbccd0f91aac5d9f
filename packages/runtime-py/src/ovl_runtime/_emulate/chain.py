"""``ovl.chain/v1``: operators run back to back as one call.

A chain file names its stages (each an ``ovl.manifest/v1`` in a folder beside it) and its
links: a buffer of a later stage that IS a buffer of an earlier stage on every rank (the same
memory, no copy). ``load_chain`` checks the file against the JSON Schema the emitter writes
(``schema/chain.schema.json``), loads every stage and checks the links and the end-to-end
reference; ``_emulate.chain.emulate_chain`` runs the stages in order on the CPU (either engine) and checks
the chain's output against a numpy reference of the whole chain.

The one end-to-end reference so far is ``mlp``: the tensor-parallel MLP
``Σ_r (silu(X W_gate,r) ⊙ (X W_up,r)) W_down,r``, reduce-scattered over the ranks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
from jsonschema.exceptions import best_match

from .._manifest.parse import load_manifest
from .._manifest.schema import json_path
from .._manifest.types import Manifest
from .._reference.arrays import relative_error
from .._report.outcome import CheckRecord, RunOutcome
from ..errors import ManifestError
from .engine import Emulator, ProgressFn, checked_runs, choose_engine, make_emulator

CHAIN_SCHEMA = "ovl.chain/v1"
CHAIN_SCHEMA_RESOURCE = "schema/chain.schema.json"
CHAIN_OPERATORS = ("mlp",)
MLP_INPUTS = ("X", "W_gate_up", "W_down")


@dataclass(frozen=True)
class StageBuffer:
    """A buffer of one stage."""

    stage: int
    buffer: str


@dataclass(frozen=True)
class ChainReference:
    """What the chain computes end to end (see the module docstring)."""

    operator: str
    M: int
    hidden: int
    intermediate: int
    inputs: dict[str, StageBuffer]
    output: StageBuffer
    tolerance: float


@dataclass(frozen=True)
class Chain:
    """A loaded chain: its stages' manifests (in run order) and the links between them."""

    name: str
    world: int
    dtype: str
    stage_names: tuple[str, ...]
    stages: tuple[Manifest, ...]
    links: tuple[tuple[StageBuffer, StageBuffer], ...]
    reference: ChainReference


@cache
def chain_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``ovl.chain/v1`` shipped with the package."""
    return json.loads(resources.files("ovl_runtime").joinpath(CHAIN_SCHEMA_RESOURCE).read_text(encoding="utf-8"))


def check_chain_schema(data: Any) -> None:
    """Validates parsed chain JSON against the shipped schema.

    @raises ManifestError naming the JSON location of the first violation.
    """
    schema = chain_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    error = best_match(cls(schema).iter_errors(data))
    if error is not None:
        message = error.message if len(error.message) <= 300 else error.message[:297] + "..."
        raise ManifestError(json_path(error.absolute_path), f"does not satisfy {CHAIN_SCHEMA}: {message}")


def _stage_buffer(d: dict[str, Any]) -> StageBuffer:
    return StageBuffer(int(d["stage"]), str(d["buffer"]))


def load_chain(path: str | Path) -> Chain:
    """Load a chain file and every stage manifest it names (relative to its folder).

    @raises ManifestError for a file that breaks the schema, stages that disagree on the world
      or element type, links between buffers of other shapes, element types or stages out of
      order, a link into a symmetric buffer, or a reference whose buffers are not the stages'.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ManifestError("", f"cannot read chain {p}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ManifestError("", f"{p} is not JSON: {exc}") from exc
    check_chain_schema(data)
    folder = p.resolve().parent
    stages = []
    for i, s in enumerate(data["stages"]):
        try:
            stages.append(load_manifest(folder / s["manifest"]))
        except ManifestError as exc:
            raise ManifestError(f"stages[{i}] ({s['manifest']}): {exc.path}", exc.detail) from exc
    ref = data["reference"]
    chain = Chain(
        name=data["name"],
        world=int(data["world"]),
        dtype=data["dtype"],
        stage_names=tuple(s["name"] for s in data["stages"]),
        stages=tuple(stages),
        links=tuple((_stage_buffer(x["from"]), _stage_buffer(x["to"])) for x in data["links"]),
        reference=ChainReference(
            operator=ref["operator"],
            M=int(ref["M"]),
            hidden=int(ref["hidden"]),
            intermediate=int(ref["intermediate"]),
            inputs={k: _stage_buffer(v) for k, v in ref["inputs"].items()},
            output=_stage_buffer(ref["output"]),
            tolerance=float(ref["tolerance"]),
        ),
    )
    check_chain(chain)
    return chain


def _buffer(chain: Chain, sb: StageBuffer, where: str) -> Any:
    if sb.stage >= len(chain.stages):
        raise ManifestError(f"{where}.stage", f"names stage {sb.stage}; the chain has {len(chain.stages)}")
    m = chain.stages[sb.stage]
    found = next((b for b in m.buffers if b.name == sb.buffer), None)
    if found is None:
        raise ManifestError(f"{where}.buffer", f"stage {sb.stage} ({m.name}) has no buffer {sb.buffer!r}")
    return found


def check_chain(chain: Chain) -> None:
    """The cross-references of a chain (see ``load_chain``)."""
    for i, m in enumerate(chain.stages):
        if m.world != chain.world:
            raise ManifestError(f"stages[{i}]", f"{m.name} runs on {m.world} ranks; the chain on {chain.world}")
        if m.dtype != chain.dtype:
            raise ManifestError(f"stages[{i}]", f"{m.name} is {m.dtype}; the chain is {chain.dtype}")
    seen: set[StageBuffer] = set()
    for i, (src, dst) in enumerate(chain.links):
        a, b = _buffer(chain, src, f"links[{i}].from"), _buffer(chain, dst, f"links[{i}].to")
        if src.stage >= dst.stage:
            raise ManifestError(
                f"links[{i}]", f"links stage {src.stage} to stage {dst.stage}: a link runs from an earlier stage to a later one"
            )
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            raise ManifestError(
                f"links[{i}]", f"{src.buffer} {list(a.shape)} {a.dtype} and {dst.buffer} {list(b.shape)} {b.dtype} are not the same memory"
            )
        if b.symmetric or a.symmetric:
            raise ManifestError(f"links[{i}]", "linked buffers are local (a symmetric buffer's peers address it)")
        if dst in seen:
            raise ManifestError(f"links[{i}].to", f"{dst.buffer} of stage {dst.stage} is linked twice")
        seen.add(dst)
    ref = chain.reference
    if ref.operator not in CHAIN_OPERATORS:
        raise ManifestError("reference.operator", f"unknown chain operator {ref.operator!r}")
    missing = [k for k in MLP_INPUTS if k not in ref.inputs]
    if missing:
        raise ManifestError("reference.inputs", f"mlp needs inputs {', '.join(MLP_INPUTS)}; missing {', '.join(missing)}")
    W, M, H, inter = chain.world, ref.M, ref.hidden, ref.intermediate
    if M % W != 0:
        raise ManifestError("reference.M", f"{M} rows do not split into {W} equal shards")
    want = {"X": (M, H), "W_gate_up": (H, 2 * inter), "W_down": (inter, H)}
    for k, shape in want.items():
        b = _buffer(chain, ref.inputs[k], f"reference.inputs.{k}")
        if int(np.prod(b.shape)) != shape[0] * shape[1]:
            raise ManifestError(f"reference.inputs.{k}", f"{b.name} {list(b.shape)} cannot be read as {list(shape)}")
    out = _buffer(chain, ref.output, "reference.output")
    if int(np.prod(out.shape)) != (M // W) * H:
        raise ManifestError("reference.output", f"{out.name} {list(out.shape)} is not one rank's slab [{M // W}, {H}]")


def silu(x: np.ndarray) -> np.ndarray:
    """``x · sigmoid(x)``."""
    return x / (1.0 + np.exp(-x))


def mlp_reference(x_shards: list[np.ndarray], w_gate_up: list[np.ndarray], w_down: list[np.ndarray]) -> list[np.ndarray]:
    """Per rank, its slab of ``Σ_r (silu(X W_gate,r) ⊙ (X W_up,r)) W_down,r`` in float64, X
    being the ranks' row shards in rank order and W_gate|up,r = ``[W_gate,r | W_up,r]``."""
    x = np.concatenate([s.astype(np.float64) for s in x_shards], axis=0)
    world = len(x_shards)
    total = np.zeros((x.shape[0], w_down[0].shape[1]))
    for r in range(world):
        wgu = w_gate_up[r].astype(np.float64)
        inter = wgu.shape[1] // 2
        total += (silu(x @ wgu[:, :inter]) * (x @ wgu[:, inter:])) @ w_down[r].astype(np.float64)
    rows = x.shape[0] // world
    return [total[r * rows : (r + 1) * rows] for r in range(world)]


class ChainEmulator:
    """The stages' emulators (one engine for all), with every link's buffers made one object
    on each rank; a launch runs the stages in order."""

    def __init__(self, chain: Chain, engine: str = "auto", seed: int = 0, timeout_s: float | None = None) -> None:
        self.chain = chain
        engines = {choose_engine(m, engine) for m in chain.stages}
        if len(engines) != 1:
            raise ManifestError("stages", f"the stages need different engines ({', '.join(sorted(engines))}): name one")
        self.engine = engines.pop()
        self.emus = [make_emulator(m, self.engine, seed=seed + i, timeout_s=timeout_s) for i, m in enumerate(chain.stages)]
        for src, dst in chain.links:
            for r in range(chain.world):
                self.buffers(dst.stage, r)[dst.buffer] = self.buffers(src.stage, r)[src.buffer]

    def buffers(self, stage: int, rank: int) -> dict[str, Any]:
        """Rank ``rank``'s buffers of stage ``stage``, by name."""
        emu = self.emus[stage]
        return emu.world.buffers[rank] if isinstance(emu, Emulator) else emu.buffers[rank]

    def _numpy(self, stage: int, rank: int, name: str) -> np.ndarray:
        v = self.buffers(stage, rank)[name]
        if isinstance(v, np.ndarray):
            return v.astype(np.float64)
        return v.float().numpy().astype(np.float64)

    def init(self) -> None:
        """Fresh inputs for every stage, later stages first, so a linked buffer starts as its
        earliest stage says (the first stage's output poisoned)."""
        for emu in reversed(self.emus):
            emu.world.init(emu.rng) if isinstance(emu, Emulator) else emu.init()

    def launch(self) -> list[float]:
        """One launch of every stage in order; per-rank wall times summed over the stages (ms)."""
        times = [0.0] * self.chain.world
        for emu in self.emus:
            for r, t in enumerate(emu.launch()):
                times[r] += t
        return times

    def checked_launch(self, run: int) -> tuple[CheckRecord, list[float]]:
        """Fresh inputs, one chain launch, then the check against ``mlp_reference``."""
        ref, W = self.chain.reference, self.chain.world
        self.init()
        H, inter = ref.hidden, ref.intermediate
        rows = ref.M // W

        def read(key: str, r: int, shape: tuple[int, int]) -> np.ndarray:
            sb = ref.inputs[key]
            arr = self._numpy(sb.stage, r, sb.buffer).reshape(-1)
            # X: rank r's own rows of its [M, hidden] receive buffer (an AllGather's own shard).
            return arr.reshape(shape)[r * rows : (r + 1) * rows] if key == "X" else arr.reshape(shape)

        x = [read("X", r, (ref.M, H)) for r in range(W)]
        wgu = [read("W_gate_up", r, (H, 2 * inter)) for r in range(W)]
        wd = [read("W_down", r, (inter, H)) for r in range(W)]
        times = self.launch()
        refs = mlp_reference(x, wgu, wd)
        outs = [self._numpy(ref.output.stage, r, ref.output.buffer).reshape(rows, H) for r in range(W)]
        errs = [relative_error(outs[r], refs[r]) for r in range(W)]
        return CheckRecord.of(run, self.epoch, errs, ref.tolerance), times

    @property
    def epoch(self) -> int:
        """Launches so far (every stage's emulator counts the same)."""
        return self.emus[-1].epoch


def emulate_chain(
    chain: Chain,
    epochs: int = 1,
    seed: int = 0,
    timeout_s: float | None = None,
    engine: str = "auto",
    on_progress: ProgressFn | None = None,
) -> RunOutcome:
    """Run ``epochs`` checked chain launches on the CPU; failures end the run and are listed
    in the outcome (``RunOutcome.raise_for_failure``)."""
    progress = on_progress or (lambda _e: None)
    emu = ChainEmulator(chain, engine, seed=seed, timeout_s=timeout_s)
    device = "cpu-interpreter" if emu.engine == "interpret" else "cpu-emulation"
    return checked_runs(emu, epochs, chain.world, device, progress)
