"""The system model's results, to the printed digits, against a stored reference.

``tests/data/model_speed_reference.json`` was written by the event engine and task-graph
construction as they were before the speed work of issue 24 (one graph per estimate, rebuilt for
every k; the numpy-per-event engine), by this file run as a script::

    .venv/bin/python tests/model/test_model_speed_reference.py --write

It holds what ``fred estimate``, ``fred sweep`` and ``fred scan`` print for reduced
configurations: the full estimate table (4 workloads x 5 fabrics), a sweep of Transformer-1T
over a few strategies (weight streaming with offload and preemptions) and of Transformer-17B,
and a scan of two workloads over 4 values of k with the paper-cell bisection. A faster engine or
graph reuse must print the same text and the same (rounded) scan JSON.

Regenerate it only for a change that is meant to change the model's results (a new memory
policy choice, a new collective default, ...), in the commit that makes that change, and say so
in its message.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "model_speed_reference.json"

#: the reduced sweeps: workload -> strategies (MP, DP, PP), on the mesh and Fred-D at rule 40
SWEEP_STRATEGIES = {
    "transformer-1t": [(20, 1, 1), (4, 1, 5), (5, 4, 1), (1, 20, 1)],
    "transformer-17b": [(2, 10, 1), (4, 5, 1), (1, 4, 5)],
}
#: the reduced scan: workloads, fabrics (the mesh is added) and k values (with bisection)
SCAN_WORKLOADS = ("resnet-152", "transformer-17b")
SCAN_FABRICS = ("fred-c", "fred-d")
SCAN_K = (0.25, 4.0, 64.0, 1000.0)


def estimate_text() -> str:
    """What ``fred estimate`` prints for the full table (default hardware)."""
    from fred.commands.estimate import format_table, links_line
    from fred.model.workload.compute import default_npu
    from fred.model.training import estimate_table
    from fred.model.system import default_params

    params, npu = default_params(), default_npu()
    rows = estimate_table()
    return links_line(params) + format_table(rows, rows[0].timing_source, npu)


def sweep_text(workload: str) -> str:
    """What ``fred sweep`` prints, for the strategies of :data:`SWEEP_STRATEGIES` only."""
    from fred.commands.sweep import format_sweep, summary, sweep_job
    from fred.model.system import default_params
    from fred.model.workload import load_workload, sweep_microbatches

    w, p, rule = load_workload(workload), default_params(), 40
    out = []
    for abc in SWEEP_STRATEGIES[workload]:
        m = sweep_microbatches(w, abc[2], rule) if (abc[2] > 1 or w.mode == "weight-streaming") else 1
        out += [sweep_job((w, f, abc, m, rule, p, None, ())) for f in ("mesh", "fred-d")]
    for r in out:               # as fred.commands.sweep.sweep sets them
        e = r["estimate"]
        base = next((x["estimate"] for x in out if x["strategy"] == r["strategy"] and x["fabric"] == "mesh"), None)
        if e is not None and base is not None:
            e.speedup = base.iteration_time / e.iteration_time
    ok = [r["estimate"] for r in out if r["estimate"] is not None]
    return format_sweep(out, summary(out), ok[0].timing_source, w.name, rule)


def scan_output() -> tuple[str, dict]:
    """What ``fred scan --detail`` prints for the reduced scan, and its JSON (rounded as printed)."""
    from fred.commands.scan import format_scan
    from fred.model.training import scan, to_json

    r = scan(SCAN_WORKLOADS, SCAN_FABRICS, SCAN_K)
    return format_scan(r, detail=True), to_json(r)


def produce() -> dict:
    text, js = scan_output()
    return {"estimate_table": estimate_text(),
            "sweep": {w: sweep_text(w) for w in SWEEP_STRATEGIES},
            "scan_text": text, "scan_json": js}


def _reference() -> dict:
    return json.loads(REFERENCE.read_text())


#: a printed number: digits with separators, a decimal part and an exponent
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")


def _same_lines(got: str, want: str, what: str):
    """The same lines with the same printed numbers (words around them may change: headers are
    not results)."""
    g, w = got.splitlines(), want.splitlines()
    diff = [f"  want: {a}\n  got:  {b}" for a, b in zip(w, g) if NUMBER.findall(a) != NUMBER.findall(b)]
    assert len(g) == len(w) and not diff, f"{what} differs from the reference:\n" + "\n".join(diff[:10])


def test_estimate_table_as_reference():
    _same_lines(estimate_text(), _reference()["estimate_table"], "fred estimate")


def test_sweeps_as_reference():
    ref = _reference()["sweep"]
    for w in SWEEP_STRATEGIES:
        _same_lines(sweep_text(w), ref[w], f"fred sweep -w {w}")


def test_scan_as_reference():
    text, js = scan_output()
    ref = _reference()
    _same_lines(text, ref["scan_text"], "fred scan")
    assert json.loads(json.dumps(js)) == ref["scan_json"]


def test_a_workload_file_is_parsed_again_when_it_changes(tmp_path):
    """The parse cache (path, modification time, size) gives a copy, and a changed file anew."""
    from fred.model.workload import load_workload
    from fred.model.workload.loader import DATA_DIR

    f = tmp_path / "w.yml"
    text = (DATA_DIR / "transformer-17b.yml").read_text()
    assert "\nlayers: 78\n" in text
    f.write_text(text)
    a = load_workload(str(f))
    a.shape["touched"] = True
    assert "touched" not in load_workload(str(f)).shape          # a copy, not the cached object
    f.write_text(text.replace("\nlayers: 78\n", "\nlayers: 7\n"))
    b = load_workload(str(f))
    assert b.shape["layers"] == 7 and len(b.layers) < len(a.layers)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: test_model_speed_reference.py --write   (rewrites the stored reference)")
    REFERENCE.write_text(json.dumps(produce(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {REFERENCE.name}")
