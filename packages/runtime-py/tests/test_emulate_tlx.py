"""The emitter's TLX example manifests (tlx-gemm with cooperative and ping-pong consumers, tlx-ag-gemm,
tlx-ag-gemm-push, tlx-gemm-rs with copy-engine and SM-push deliveries; the cooperative ones also in 2x1
clusters), emulated over several epochs.

They come from the built ``@ovl/tlx-emitter`` (``tlxExamples``) for worlds 1 to 4 and one
or two chunks per rank; a corrupted push table must fail rather than give a wrong number.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ovl_runtime import emulate, parse_manifest
from ovl_runtime._emulate.tlx import PUSH_ROW_FIELDS, cta_rows, push_rows
from ovl_runtime.errors import KernelFault

EMITTER = Path(__file__).resolve().parents[2] / "tlx-emitter" / "dist" / "index.js"

SCRIPT = """
const { tlxExamples } = await import(process.argv[1]);
const out = {};
for (const world of [1, 2, 3, 4]) for (const split of [1, 2]) {
  const res = tlxExamples({ world, M: 256 * world * split, N: 384, K: 128, split });
  for (const [name, r] of Object.entries(res)) out[`${name}_w${world}_s${split}`] = r.manifest;
}
console.log(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def emitted() -> dict:
    node = shutil.which("node")
    if node is None or not EMITTER.exists():
        pytest.skip(f"needs node and {EMITTER} (built by the @ovl/tlx-emitter build)")
    run = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT, EMITTER.as_uri()], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(run.stdout)


# Example name -> the template kind of its compute kernel (ping-pong consumers are a variant of the same kinds).
KINDS = {
    "tlx_gemm": "tlx-gemm",
    "tlx_gemm_pingpong": "tlx-gemm",
    "tlx_ag_gemm": "tlx-ag-gemm",
    "tlx_ag_gemm_push": "tlx-ag-gemm-push",
    "tlx_gemm_rs": "tlx-gemm-rs",
    "tlx_gemm_rs_pingpong_sm": "tlx-gemm-rs",
    # 2x1 clusters sharing B by multicast: the same kinds, the cluster is the launch's.
    "tlx_gemm_multicast": "tlx-gemm",
    "tlx_ag_gemm_multicast": "tlx-ag-gemm",
    "tlx_gemm_rs_multicast_tn": "tlx-gemm-rs",
}


# Every example at every world with one chunk per rank, and with two chunks at worlds 2 and 3: the
# full grid's (1, 2) moves nothing (one rank) and (4, 2) was a third of the whole file's time
# (the emulation grows as world² × split) for no case that (4, 1) and (3, 2) do not already cover.
WORLD_SPLITS = [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2), (3, 2)]


@pytest.mark.parametrize(("world", "split"), WORLD_SPLITS)
@pytest.mark.parametrize("name", list(KINDS))
def test_tlx_examples_are_correct_over_three_epochs(emitted, name, world, split):
    d = emitted[f"{name}_w{world}_s{split}"]
    m = parse_manifest(d)
    assert m.kernels[0].template_kind == KINDS[name]
    assert m.kernels[0].precompiled is not None and m.kernels[0].precompiled.target == "sm_90a"
    out = emulate(m, epochs=3, seed=world * 10 + split)
    assert out.failures == [] and out.ok and len(out.checks) == 3
    assert all(c.epoch == i + 1 for i, c in enumerate(out.checks))


def _push(d: dict) -> list[list[int]]:
    return next(t for t in d["tables"] if t["name"] == "push_rows")["values"]


@pytest.mark.parametrize("world", [2, 3, 4])
def test_push_variant_waits_for_every_piece(emitted, world):
    """Dropping one row's notify leaves its slot an arrival short: the wait times out (or stalls), no output is read early."""
    d = copy.deepcopy(emitted[f"tlx_ag_gemm_push_w{world}_s2"])
    rows = _push(d)[0]
    width = len(PUSH_ROW_FIELDS)
    assert rows[width - 1] >= 0
    rows[width - 1] = -1
    out = emulate(parse_manifest(d), epochs=2, timeout_s=0.5)
    assert not out.ok and out.failures and out.failures[0].code == "wait-timeout"


def test_push_variant_needs_the_data_not_only_the_notify(emitted):
    """A row that notifies but copies to the wrong place leaves rows of A unpushed: the check fails."""
    d = copy.deepcopy(emitted["tlx_ag_gemm_push_w2_s1"])
    rows = _push(d)[1]
    rows[2] += 1  # rank 1's first row lands one element off
    out = emulate(parse_manifest(d), epochs=1)
    assert not out.ok and out.failures[0].code == "check-failed"


def test_push_rows_outside_the_buffers_are_kernel_faults(emitted):
    d = copy.deepcopy(emitted["tlx_ag_gemm_push_w2_s1"])
    _push(d)[0][1] = 7  # dst_rank outside the world
    out = emulate(parse_manifest(d), epochs=1, timeout_s=0.5)
    assert out.failures and out.failures[0].code == "kernel-fault" and "outside the world" in str(out.failures[0])


def test_push_variant_counts_every_launch(emitted):
    """Targets grow by the pieces per chunk each epoch: after k launches every waited slot holds k x pieces."""
    from ovl_runtime import Emulator

    d = emitted["tlx_ag_gemm_push_w3_s2"]
    m = parse_manifest(d)
    emu = Emulator(m, seed=1)
    # The producer reads the epoch on the device: the epoch word x WAIT_ARRIVALS, no host epoch argument.
    assert [n for n, a in m.kernels[0].args if a.kind == "epoch-word"] == ["epoch_ptr"]
    assert not [n for n, a in m.kernels[0].args if a.kind in ("epoch", "epoch-target")]
    arrivals = m.kernels[0].constexprs["WAIT_ARRIVALS"]
    for k in range(1, 4):
        emu.checked_launch(k - 1)
        assert emu.world.signals is not None
        tp = m.kernels[0].tile_program
        for r in range(m.world):
            waited = {s for s in (tp.slots[0]({"ovl_m": b, "ovl_rank": r}, {}) for b in range(tp.num_pid_m)) if s >= 0}
            assert waited and {emu.world.signals.board(r).value(s) for s in waited} == {k * arrivals}


def test_cta_rows_partition_the_table():
    rng = random.Random(7)
    for _ in range(200):
        n, programs = rng.randint(0, 64), rng.randint(1, 40)
        taken = [i for pid in range(programs) for i in cta_rows(n, programs, pid)]
        assert sorted(taken) == list(range(n))


def test_push_rows_decode_and_refuse_short_tables():
    flat = np.arange(10, dtype=np.int64)
    rows = push_rows(flat, 2)
    assert (rows[1].src_offset, rows[1].dst_rank, rows[1].notify_slot) == (5, 6, 9)
    with pytest.raises(KernelFault):
        push_rows(flat, 3)


@pytest.mark.parametrize("name", ["tlx_gemm_rs", "tlx_gemm_rs_pingpong_sm"])
def test_gemm_rs_producer_that_never_notifies_times_out(emitted, name):
    """The deliveries wait on the producer's tile-done slots: a notify map of -1 leaves them waiting."""
    d = copy.deepcopy(emitted[f"{name}_w2_s1"])
    d["kernels"][0]["tileProgram"]["slots"] = [{"kind": "static", "expr": {"op": "const", "value": -1}}]
    out = emulate(parse_manifest(d), epochs=1, timeout_s=0.5)
    assert not out.ok and out.failures and out.failures[0].code == "wait-timeout"


def _reversed(n: int) -> dict:
    """The map ``ovl_m -> n - 1 - ovl_m``."""
    minus_m = {"op": "mul", "args": [{"op": "const", "value": -1}, {"op": "var", "name": "ovl_m"}]}
    return {"kind": "static", "expr": {"op": "add", "args": [{"op": "const", "value": n - 1}, minus_m]}}


def test_gemm_rs_producer_in_another_order_is_still_correct(emitted):
    """The m-block order decides when tiles are computed and notified, not what: a reversed order passes."""
    d = copy.deepcopy(emitted["tlx_gemm_rs_w2_s2"])
    program = d["kernels"][0]["tileProgram"]
    assert program["order"]["kind"] == "static"  # the rank-rotated sending order, inline in the kernel
    program["order"] = _reversed(program["numPidM"])
    out = emulate(parse_manifest(d), epochs=2)
    assert out.ok and out.failures == []


def test_order_outside_the_m_blocks_is_a_kernel_fault(emitted):
    """An order map that names an m-block past the grid fails the launch, as the kernel would read past A."""
    d = copy.deepcopy(emitted["tlx_ag_gemm_w2_s1"])
    program = d["kernels"][0]["tileProgram"]
    program["order"] = _reversed(program["numPidM"] + 1)
    out = emulate(parse_manifest(d), epochs=1)
    assert not out.ok and out.failures and "outside" in str(out.failures[0])


def test_ag_consumer_waits_on_its_inline_wait_slots(emitted):
    """The wait slots (none on the rank's own chunk) print inline: the program computes each m-block's
    slot per rank, so copies that signal another slot leave it waiting."""
    d = copy.deepcopy(emitted["tlx_ag_gemm_w2_s2"])
    slots = d["kernels"][0]["tileProgram"]["slots"][0]
    assert slots["kind"] == "static" and not d["tables"]
    unused = d["signals"]["slots"]
    d["signals"]["slots"] += 1
    next(b for b in d["buffers"] if b["name"] == d["signals"]["buffer"])["shape"] = [unused + 1]
    for rank in d["hostOps"]:
        for stream in rank["streams"]:
            for op in stream["ops"]:
                if op.get("signal") is not None:
                    op["signal"]["slot"] = unused  # a slot no program waits on
    out = emulate(parse_manifest(d), epochs=1, timeout_s=0.5)
    assert not out.ok and out.failures and out.failures[0].code == "wait-timeout"
