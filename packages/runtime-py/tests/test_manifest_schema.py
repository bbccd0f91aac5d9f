"""The runner checks every manifest it loads against the emitter's JSON Schema (shipped in
the package) before its own parsing; a violation is a ManifestError naming the JSON path."""

import copy
import json

import builders
import pytest

from ovl_runtime import MANIFEST_SCHEMA, ManifestError, load_manifest
from ovl_runtime._manifest.schema import check_manifest_schema, json_path, manifest_json_schema

BUILT = {
    "ag_gemm": lambda: builders.ag_gemm(world=2),
    "gemm_rs": lambda: builders.gemm_rs(world=4, M=256),
    "gemm_rs_sm": lambda: builders.gemm_rs_sm(world=2),
    "all_gather_pull": lambda: builders.all_gather_pull(world=3, M=96),
    "reduce_scatter_ring": lambda: builders.reduce_scatter_ring(world=3, M=96),
}


def test_the_shipped_schema_is_the_manifest_contract():
    schema = manifest_json_schema()
    assert schema["properties"]["$schema"]["const"] == MANIFEST_SCHEMA
    assert "reference" in schema["required"]


@pytest.mark.parametrize("name", sorted(BUILT))
def test_hand_built_manifests_satisfy_the_schema(name):
    check_manifest_schema(BUILT[name]())


def _load(tmp_path, d):
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text("# kernel\n")
    (tmp_path / "m.json").write_text(json.dumps(d))
    return load_manifest(tmp_path / "m.json")


def test_load_manifest_accepts_a_valid_manifest(tmp_path):
    assert _load(tmp_path, builders.ag_gemm(world=2)).world == 2


def _without(d, *path):
    *head, last = path
    for k in head:
        d = d[k]
    del d[last]


SCHEMA_ONLY = [
    # Faults the runner's own parser does not look at: only the schema catches them.
    (lambda d: d.update(extra=1), "", "extra"),
    (lambda d: d["buffers"][0].update(stride=[1]), "buffers[0]", "stride"),
    (lambda d: d["timing"].update(reps=2.5), "timing.reps", "integer"),
    (lambda d: _without(d, "name"), "", "name"),
    (lambda d: d["kernels"][0].update(numWarps=0), "kernels[0].numWarps", "0"),
]


@pytest.mark.parametrize("mutate,path,word", SCHEMA_ONLY, ids=["extra-key", "buffer-key", "reps", "no-name", "num-warps"])
def test_load_manifest_reports_schema_violations_by_json_path(tmp_path, mutate, path, word):
    d = copy.deepcopy(builders.ag_gemm(world=2))
    mutate(d)
    with pytest.raises(ManifestError) as err:
        _load(tmp_path, d)
    assert err.value.path == path
    assert err.value.code == "bad-manifest"
    assert "ovl.manifest/v1" in str(err.value) and word in str(err.value)


def test_the_deepest_violation_is_named(tmp_path):
    d = builders.ag_gemm(world=2)
    d["buffers"][0]["dtype"] = "fp8"
    with pytest.raises(ManifestError) as err:
        check_manifest_schema(d)
    assert err.value.path == "buffers[0].dtype" and "fp8" in str(err.value)


def test_json_paths_are_spelled_as_the_runners_other_errors():
    assert json_path(["hostOps", 0, "streams", 1, "ops", 2, "src"]) == "hostOps[0].streams[1].ops[2].src"
    assert json_path([]) == ""


def test_a_kind_tagged_union_names_the_wrong_kind_or_the_wrong_field_of_its_kind():
    d = builders.ag_gemm(world=2)
    d["kernels"][0]["args"][0]["value"]["kind"] = "pointer"
    with pytest.raises(ManifestError) as err:
        check_manifest_schema(d)
    assert err.value.path == "kernels[0].args[0].value" and "kind 'pointer' is not one of 'buffer'" in str(err.value)
    d = builders.ag_gemm(world=2)
    d["hostOps"][0]["streams"][0]["ops"][0]["src"]["length"] = -1
    with pytest.raises(ManifestError) as err:
        check_manifest_schema(d)
    assert err.value.path == "hostOps[0].streams[0].ops[0].src.length"
