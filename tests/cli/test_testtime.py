"""fred.bench testtime (fred/benchmarks/testtime.py): its pytest plugin records each test's CPU
time, its report names the slowest, and the groups of make regress agree everywhere."""

import json
import os
import pathlib
import re
import subprocess
import sys

from fred.benchmarks import testtime

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_plugin_records_cpu_per_test_and_report_ranks_them(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "def test_busy():\n    x = 0\n    for i in range(3_000_000):\n        x += i\n\n"
        "def test_idle():\n    pass\n")
    rec = tmp_path / "rec"
    rec.mkdir()
    env = dict(os.environ, **{testtime.ENV: str(rec), "PYTEST_PLUGINS": "fred.benchmarks.testtime"})
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                        str(tmp_path / "test_x.py")], env=env, capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    recs = testtime.tests_of(rec)
    assert sorted(x["test"].split("::")[1] for x in recs) == ["test_busy", "test_idle"]
    busy = next(x for x in recs if x["test"].endswith("test_busy"))
    idle = next(x for x in recs if x["test"].endswith("test_idle"))
    assert busy["cpu"] > idle["cpu"] and busy["cpu"] > 0.05
    run = {"wall": 3.0, "cpu": 2.5, "exit": 0, "summary": "2 passed in 3.0s", "cores": 2, "load": 0.1,
           "builds": 0, "revision": "abc1234", "target": "test"}
    text = testtime.report(run, recs)
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    assert "test_busy" in rows[0] and len(rows) == 2
    assert "3 s wall, 2 s CPU" in text or "3 s wall, 3 s CPU" in text


def test_regress_groups_agree_and_readme_has_the_blocks():
    make = (ROOT / "Makefile").read_text()
    groups = re.search(r"^REGRESS_GROUPS := (.*)$", make, re.M).group(1).split()
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import conftest
    finally:
        sys.path.pop(0)
    assert tuple(groups) == testtime.GROUPS == tuple(conftest.REGRESS_GROUPS)
    for g in groups:
        dry = subprocess.run(["make", "-n", "-C", str(ROOT), f"regress-{g}"], capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr
        assert f'-m pytest -n 2 --dist worksteal -m "regress and group_{g}" tests' in dry.stdout
    dry = subprocess.run(["make", "-n", "-C", str(ROOT), "regress"], capture_output=True, text=True)
    assert all(f'"regress and group_{g}"' in dry.stdout for g in groups) and '-m "not regress"' in dry.stdout
    readme = (ROOT / "README.md").read_text()
    for begin, end in ((testtime.BEGIN, testtime.END), (testtime.RBEGIN, testtime.REND)):
        assert readme.count(begin) == 1 and readme.count(end) == 1
    table = testtime.regress_report({"cells": {"summary": "3 passed", "wall": 600.0, "cpu": 1100.0, "cores": 2,
                                               "load": 0.2, "builds": 4, "revision": "abc", "exit": 0}})
    assert "| `make regress-cells` | 3 passed | 10.0 min | 18.3 min |" in table
    assert "| `make regress-formal` | not measured yet |" in table


def test_bad_arguments_one_line(capsys):
    assert testtime.main(["--regress", "gates"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fred: error: --regress gates") and err.count("\n") == 1
    assert testtime.main(["--from", str(ROOT / "no-such-folder")]) == 2
    assert testtime.main(["--fast"]) == 2
    assert json.dumps(testtime.GROUPS)
