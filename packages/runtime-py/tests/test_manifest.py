import copy
import json

import builders
import pytest

from ovl_runtime import MANIFEST_SCHEMA, ManifestError, load_manifest, parse_manifest
from ovl_runtime._manifest.schema import manifest_json_schema
from ovl_runtime._manifest.types import CopyOp, NumSms, WaitOp


def test_builders_parse_into_typed_dataclasses():
    m = parse_manifest(builders.gemm_rs(world=2))
    assert m.world == 2 and m.signals.slots == 16 and m.reference.operator == "gemm-rs"
    producer, reduce = m.kernels
    assert producer.template_kind == "gemm-producer" and producer.grid == (NumSms(cap=16),)
    assert reduce.grid == (4, 2)
    assert producer.arg("notify_ptr").kind == "table" and reduce.arg("epoch_ptr").kind == "epoch-word"
    ops = m.streams_of(0)[0].ops
    assert isinstance(ops[0], WaitOp) and ops[0].arrivals == 2
    assert isinstance(ops[1], CopyOp) and ops[1].dst.rank == 1 and ops[1].signal is not None
    assert m.table("order").values[1][:4] == (0, 1, 2, 3)


def test_identifier_spelling_of_a_template_kind_names_the_same_template():
    d = builders.ag_gemm()
    d["kernels"][0]["template"]["kind"] = "ag_gemm_consumer"
    assert parse_manifest(d).kernels[0].template_kind == "ag-gemm-consumer"


def _set(path, value):
    def mutate(d):
        *head, last = path
        for k in head:
            d = d[k]
        if value is KeyError:
            del d[last]
        else:
            d[last] = value

    return mutate


BAD = [
    (_set(["$schema"], "ovl.manifest/v0"), "$schema"),
    (_set(["world"], 0), "world"),
    (_set(["world"], True), "world"),
    (_set(["buffers"], []), "buffers"),
    (_set(["buffers", 0, "dtype"], "fp8"), "buffers[0].dtype"),
    (_set(["buffers", 1, "shape"], [32, -1]), "buffers[1].shape[1]"),
    (_set(["buffers", 2, "name"], "class-name"), "buffers[2].name"),
    (_set(["signals", "bits"], 16), "signals.bits"),
    (_set(["kernels", 0, "source"], "../x.py"), "kernels[0].source"),
    (_set(["kernels", 0, "grid"], []), "kernels[0].grid"),
    (_set(["kernels", 0, "args", 0, "value", "kind"], "pointer"), "kernels[0].args[0].value.kind"),
    (_set(["kernels", 0, "args", 0, "value", "name"], "nope"), "kernels[0].args[0].value.name"),
    (_set(["kernels", 0, "args", 3, "value", "name"], "nope"), "kernels[0].args[3].value.name"),
    (_set(["kernels", 0, "template"], KeyError), "kernels[0].template"),
    (_set(["hostOps", 0, "streams", 0, "ops", 0, "src", "length"], 10**6), "hostOps[0].streams[0].ops[0].src"),
    (_set(["hostOps", 0, "streams", 0, "ops", 0, "dst", "rank"], 5), "hostOps[0].streams[0].ops[0].dst.rank"),
    (_set(["hostOps", 0, "streams", 0, "ops", 0, "dst", "buffer"], "C"), "hostOps[0].streams[0].ops[0].dst"),
    (_set(["hostOps", 0, "streams", 0, "ops", 0, "signal", "slot"], 99), "hostOps[0].streams[0].ops[0].signal.slot"),
    (_set(["hostOps", 0, "streams", 0, "ops", 0, "kind"], "send"), "hostOps[0].streams[0].ops[0].kind"),
    (_set(["tables", 0, "values"], [[0, 1]]), "tables[0].values"),
    (_set(["reference", "operator"], "matmul"), "reference.operator"),
    (_set(["reference", "output"], "D"), "reference.output"),
    (_set(["reference", "rowsPerRank"], 7), "reference.rowsPerRank"),
    (_set(["reference", "tolerance"], 0), "reference.tolerance"),
    (_set(["timing", "reps"], 0), "timing.reps"),
    (_set(["waitTimeoutNs"], KeyError), "waitTimeoutNs"),
    (_set(["signals", "buffer"], "A"), "signals.buffer"),
]


@pytest.mark.parametrize("mutate,path", BAD, ids=[p for _, p in BAD])
def test_malformed_manifests_raise_typed_errors_naming_the_field(mutate, path):
    d = copy.deepcopy(builders.ag_gemm(world=2))
    mutate(d)
    with pytest.raises(ManifestError) as err:
        parse_manifest(d)
    assert err.value.path == path
    assert err.value.code == "bad-manifest"
    assert str(err.value).startswith(path)


def test_a_copy_cannot_reach_a_peers_local_buffer():
    d = builders.gemm_rs(world=2)
    op = d["hostOps"][0]["streams"][0]["ops"][1]
    op["dst"]["buffer"] = "C"  # C is not symmetric, and the op writes rank 1's
    with pytest.raises(ManifestError, match="not symmetric"):
        parse_manifest(d)


def test_load_resolves_kernel_sources_relative_to_the_manifest(tmp_path):
    d = builders.ag_gemm()
    (tmp_path / "kernels").mkdir()
    d["kernels"][0]["source"] = "kernels/ag.py"
    (tmp_path / "kernels" / "ag.py").write_text("# kernel\n")
    (tmp_path / "m.json").write_text(json.dumps(d))
    m = load_manifest(tmp_path / "m.json")
    assert m.kernels[0].source_path == (tmp_path / "kernels" / "ag.py").resolve()
    (tmp_path / "kernels" / "ag.py").unlink()
    with pytest.raises(ManifestError) as err:
        load_manifest(tmp_path / "m.json")
    assert err.value.path == "kernels[0].source" and "does not exist" in str(err.value)


def test_unreadable_or_non_json_files_are_manifest_errors(tmp_path):
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not JSON"):
        load_manifest(tmp_path / "bad.json")


def test_hand_built_manifests_satisfy_the_emitters_json_schema():
    import jsonschema

    # The copy the package ships, which a tlx-emitter test keeps equal to the zod-generated one.
    schema = manifest_json_schema()
    built = (
        builders.ag_gemm(world=2),
        builders.gemm_rs(world=4, M=256),
        builders.gemm_rs_sm(world=2),
        builders.all_gather_pull(world=3, M=96),
        builders.reduce_scatter_ring(world=3, M=96),
    )
    for d in built:
        assert d["$schema"] == MANIFEST_SCHEMA
        jsonschema.validate(d, schema)


def test_a_num_sms_grid_leaves_its_reserve_and_keeps_its_cap():
    d = builders.gemm_rs(world=2)
    d["kernels"][0]["grid"] = [{"kind": "num-sms", "cap": 100, "reserve": 8}]
    (g,) = parse_manifest(d).kernels[0].grid
    assert g == NumSms(cap=100, reserve=8)
    assert [g.resolve(n) for n in (132, 100, 9, 4)] == [100, 92, 1, 1]
    assert NumSms().resolve(132) == 132 and NumSms(reserve=0, cap=None).resolve(7) == 7
    d["kernels"][0]["grid"] = [{"kind": "num-sms", "reserve": -1}]
    with pytest.raises(ManifestError, match="reserve"):
        parse_manifest(d)
