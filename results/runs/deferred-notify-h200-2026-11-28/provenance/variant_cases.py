"""What the hand-edited variant scripts share: a TLX case copied to ``<case-dir>_<tag>/`` with its source
edited (cubins left out: compile the copies with ``scripts/tlx-aot-compile.py``), and the bench file
written back with the shapes kept."""

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path


def load_bench(d: str, names: set[str]) -> tuple[dict, list[dict]]:
    """``<d>/compute.json`` and its shapes named in ``names``, in the file's order."""
    bench = json.loads(Path(d, "compute.json").read_text())
    return bench, [s for s in bench["shapes"] if s["name"] in names]


def variant_case(d: str, case: dict, tag: str, edit: Callable[[str], str], expect: Callable[[dict], dict] | None = None) -> dict:
    """``case`` as variant ``tag``: its folder copied once (a plain kernel serves every shape), the source
    edited and, with ``expect``, its PTX expectations rewritten; the case record pointing at the copy."""
    old_dir = os.path.dirname(case["file"])
    new_dir = f"{old_dir}_{tag.replace(' ', '_')}"
    if not Path(d, new_dir).exists():
        shutil.copytree(Path(d, old_dir), Path(d, new_dir), ignore=shutil.ignore_patterns("*.cubin", "*.sm_90a.json", "*.ptx"))
        f = Path(d, new_dir, os.path.basename(case["file"]))
        f.write_text(edit(f.read_text()))
        if expect is not None:
            e = Path(d, new_dir, "expect.json")
            e.write_text(json.dumps(expect(json.loads(e.read_text())), indent=2))
    v = dict(case, label=f"{case['label']} {tag}")
    for k in ("file", "cubin", "metadata"):
        v[k] = case[k].replace(old_dir, new_dir)
    return v


def add_variants(d: str, names: set[str], variants: Callable[[dict, dict], list[dict]]) -> None:
    """The named shapes of ``<d>/compute.json`` without their ``previous`` cases, each other case followed by
    ``variants(shape, case)``, written back."""
    bench, selected = load_bench(d, names)
    shapes = []
    for s in selected:
        cases = []
        for c in s["cases"]:
            if c.get("role") == "previous":
                continue
            cases += [c, *variants(s, c)]
        shapes.append(dict(s, cases=cases))
    write_bench(d, bench, shapes)


def write_bench(d: str, bench: dict, shapes: list[dict]) -> None:
    """``<d>/compute.json`` with ``shapes`` in place of the bench's, and a line saying what it holds."""
    Path(d, "compute.json").write_text(json.dumps(dict(bench, shapes=shapes), indent=1))
    print(f"{len(shapes)} shapes, {sum(len(s['cases']) for s in shapes)} cases in {d}/compute.json")


def variants_cli(variants: Callable[[str, dict, dict], list[dict]], doc: str | None) -> None:
    """``script.py <bench-dir> <shape,shape,...>``: ``add_variants`` with ``variants(bench_dir, shape, case)``."""
    cli(lambda d, names: add_variants(d, names, lambda s, c: variants(d, s, c)), doc)


def cli(main: Callable[[str, set[str]], None], doc: str | None) -> None:
    """``script.py <bench-dir> <shape,shape,...>``: ``main`` on them, else the usage (``doc``)."""
    if len(sys.argv) != 3:
        raise SystemExit(doc)
    main(sys.argv[1], set(sys.argv[2].split(",")))
