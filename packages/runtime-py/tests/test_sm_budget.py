"""The one-GPU SM budget: every spinning program fits beside a reserve of free SMs."""

from __future__ import annotations

import math
import random

import pytest

from ovl_runtime._manifest.types import KernelArg, KernelSpec, NumSms
from ovl_runtime._runner.sm_budget import default_reserve, kernel_waits, plan_sm_budget
from ovl_runtime.errors import UsageError


def _k(name: str, kind: str, grid: tuple, stream: str = "compute", target: bool = False) -> KernelSpec:
    args = (("target", KernelArg("epoch-target", arrivals=1)),) if target else ()
    return KernelSpec(
        name=name,
        source=f"{name}.py",
        entry=name,
        stream=stream,
        grid=grid,
        num_warps=4,
        num_stages=2,
        args=args,
        constexprs={},
        template_kind=kind,
        template_params={},
    )


GEMM = _k("gemm_producer", "gemm-producer", (NumSms(cap=512),))
CONSUMER = _k("ag_gemm_consumer", "ag-gemm-consumer", (NumSms(cap=512),), target=True)
REDUCE = _k("rs_reduce", "rs-reduce", (NumSms(cap=128),), target=True)
PUSH = _k("sm_push", "sm-push", (8,), stream="comm")


def test_waiting_kernels_are_known_by_kind_or_epoch_target():
    assert kernel_waits(CONSUMER) and kernel_waits(REDUCE) and kernel_waits(PUSH)
    assert not kernel_waits(GEMM)
    assert kernel_waits(_k("custom", "my-kernel", (4,), target=True))
    assert default_reserve(132) == 8 and default_reserve(16) == 2


def test_ag_gemm_consumers_share_the_device_less_the_reserve():
    b = plan_sm_budget([CONSUMER], world=8, num_sms=132)
    assert b.reserve == 8 and b.per_rank == 15 and b.grids == ((15,),)
    assert b.concurrent_waiting_programs(["compute"]) == 120 <= 132 - 8


def test_non_waiting_kernels_keep_the_whole_device_and_fixed_waiters_come_off_the_share():
    # GEMM+RS with SM pushes: the producer does not wait; per rank the push kernel's 8
    # programs (comm stream) and the reduce (compute stream) may spin at once.
    b = plan_sm_budget([_k("gemm_producer", "gemm-producer", (NumSms(cap=512, reserve=8),)), PUSH, REDUCE], world=8, num_sms=132)
    assert b.grids == ((124,), (8,), (7,))
    assert b.concurrent_waiting_programs(["compute", "comm", "compute"]) == 8 * (8 + 7) <= 124


def test_cap_and_the_grids_own_reserve_are_respected():
    k = _k("c", "ag-gemm-consumer", (NumSms(cap=5),), target=True)
    assert plan_sm_budget([k], world=2, num_sms=132).grids == ((5,),)
    k = _k("c", "ag-gemm-consumer", (NumSms(reserve=130),), target=True)
    assert plan_sm_budget([k], world=2, num_sms=132).grids == ((2,),)


def test_a_fixed_waiting_grid_beyond_the_budget_is_refused_naming_the_kernel():
    big = _k("big_push", "sm-push", (64,), stream="comm")
    with pytest.raises(UsageError, match="big_push.*fixed grid of 64"):
        plan_sm_budget([GEMM, big, REDUCE], world=4, num_sms=132)
    with pytest.raises(UsageError, match="sm_push.*fixed grid of 8"):
        plan_sm_budget([PUSH, REDUCE], world=8, num_sms=66)  # 58 // 8 = 7 per rank


def test_too_many_ranks_leave_no_program_and_are_refused():
    with pytest.raises(UsageError, match="ag_gemm_consumer.*no program"):
        plan_sm_budget([CONSUMER], world=16, num_sms=16)
    with pytest.raises(UsageError, match="reserve must be >= 1"):
        plan_sm_budget([CONSUMER], world=2, num_sms=16, reserve=0)


def _random_kernel(rng: random.Random, i: int) -> KernelSpec:
    stream = rng.choice(["compute", "comm"])
    waits = rng.random() < 0.6
    kind = rng.choice(["ag-gemm-consumer", "rs-reduce", "sm-pull"]) if waits else rng.choice(["gemm-producer", "tlx-gemm"])
    if rng.random() < 0.7:
        dims: tuple = (NumSms(cap=rng.choice([None, 1, 7, 64, 512]), reserve=rng.choice([0, 0, 8, 200])),)
        if rng.random() < 0.2:
            dims += (rng.randint(1, 3),)
    else:
        dims = (rng.randint(1, 12),)
    return _k(f"k{i}", kind, dims, stream=stream)


def test_property_the_spinning_programs_never_exceed_the_budget_and_every_kernel_gets_a_program():
    rng = random.Random(20261124)
    planned = refused = 0
    for _ in range(3000):
        world = rng.choice([1, 2, 3, 4, 8, 16])
        num_sms = rng.choice([8, 16, 20, 66, 78, 114, 132, 148])
        kernels = [_random_kernel(rng, i) for i in range(rng.randint(1, 4))]
        reserve = rng.choice([None, 1, 4])
        try:
            b = plan_sm_budget(kernels, world, num_sms, reserve)
        except UsageError as exc:
            refused += 1
            assert any(k.name in str(exc) for k in kernels) or "reserve" in str(exc)
            continue
        planned += 1
        assert b.reserve >= 1
        assert b.concurrent_waiting_programs([k.stream for k in kernels]) <= num_sms - b.reserve
        for k, g in zip(kernels, b.grids):
            assert len(g) == len(k.grid) and min(g) >= 1 and math.prod(g) >= 1
            for spec, d in zip(k.grid, g):
                if isinstance(spec, NumSms):
                    assert d <= spec.resolve(num_sms)
                else:
                    assert d == spec
    assert planned > 1000 and refused > 50


def test_one_rank_launches_non_waiting_kernels_first_and_keeps_each_streams_order():
    from ovl_runtime._runner.onegpu import kernel_phases

    # GEMM+RS with SM pushes: producer (compute), push (comm, waits), reduce (compute, waits).
    assert kernel_phases(["compute", "comm", "compute"], [False, True, True]) == ([0], [1, 2])
    # A non-waiting kernel after a waiting one of its stream stays behind it (stream order)...
    assert kernel_phases(["compute", "compute", "comm"], [True, False, False]) == ([2], [0, 1])
    # ...and the phases cover every kernel once, in manifest order within each.
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 6)
        streams = [rng.choice(["compute", "comm"]) for _ in range(n)]
        waits = [rng.random() < 0.5 for _ in range(n)]
        first, rest = kernel_phases(streams, waits)
        assert sorted(first + rest) == list(range(n)) and first == sorted(first) and rest == sorted(rest)
        assert not any(waits[i] for i in first)
        for s in ("compute", "comm"):
            order = [i for i in first + rest if streams[i] == s]
            assert order == sorted(order)


def test_a_consumer_too_large_for_the_budget_is_deferred_only_where_host_ops_meet_every_wait():
    from dataclasses import replace
    from types import SimpleNamespace

    # A non-persistent MoE consumer: one program per tile, 288 of them, far beyond 8 ranks' share of 15.
    moe = replace(_k("ag_moe", "local-consumer", (288,), target=True), tile_program=SimpleNamespace(role="consumer"))
    with pytest.raises(UsageError, match="fixed grid of 288 programs"):
        plan_sm_budget([moe], world=8, num_sms=132)
    b = plan_sm_budget([moe, CONSUMER], world=8, num_sms=132, can_defer=True)
    assert b.deferred == (True, False) and b.waits == (False, True)
    # It keeps its grid and takes no share: the persistent consumer still gets the whole share.
    assert b.grids[0] == (288,) and b.grids[1] == (b.per_rank,)
    assert b.concurrent_waiting_programs(["compute", "compute"]) == 8 * b.per_rank <= 132 - b.reserve
    # A producer (it notifies) or a fitting grid is never deferred.
    producer = replace(moe, tile_program=SimpleNamespace(role="producer"))
    with pytest.raises(UsageError, match="fixed grid"):
        plan_sm_budget([producer], world=8, num_sms=132, can_defer=True)
    small = replace(moe, grid=(4,))
    assert plan_sm_budget([small], world=8, num_sms=132, can_defer=True).deferred == (False,)
