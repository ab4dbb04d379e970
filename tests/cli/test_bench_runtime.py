"""``python -m fred.bench runtime`` (fred/benchmarks/runtime.py): make run's step lines parsed into
the CPU breakdown the README block shows; the lines fred.run and the characterization print are
the ones it reads; a run that did not finish is refused, not reported."""

import contextlib
import io

import pytest

from fred.benchmarks import runtime
from fred.sim.characterize.run import Progress

LOG = """[setup] installing
[run 1/4 +   0s,    1s CPU] emit Verilog into build/verilog (cells)
  build/verilog/fred_r.v: ok (7 s)
[run 2/4 +  40s,   30s CPU] characterize the RTL
[characterize 1/2 +    0s,    30s CPU] cell R: regression
[characterize      +   10s,    45s CPU]   switch: 12 ports | build
[characterize 2/2 +   50s,   100s CPU] summary, tool versions
[run 3/4 + 100s,  110s CPU] fred estimate
[run] done in 130 s wall, 150 s CPU
"""


def test_breakdown_is_the_cpu_between_step_lines():
    rows = runtime.breakdown(LOG)
    assert [r[0] for r in rows] == [
        "run 1/4: emit Verilog into build/verilog (cells)", "run 2/4: characterize the RTL",
        "characterize 1/2: cell R: regression", "characterize: switch: 12 ports | build",
        "characterize 2/2: summary, tool versions", "run 3/4: fred estimate"]
    assert [r[1] for r in rows] == [29, 0, 15, 55, 10, 40]
    # the characterization's clock starts at its first line: shifted onto make run's
    assert [r[2] for r in rows] == [40, 0, 10, 40, 10, 30]
    assert sum(r[1] for r in rows) == 150 - 1


def test_report_states_both_parts_and_escapes_table_cells():
    run = {"revision": "abc1234", "cores": 2, "load": 0.5, "builds": 3, "dirty": False,
           "venv": {"wall": 60.0, "cpu": 30.0, "exit": 0}, "run": {"wall": 130.0, "cpu": 151.0, "exit": 0}}
    text = runtime.report(run, LOG)
    assert "**3.0 min of CPU, 3.2 min wall**" in text and "3 Verilator builds made" in text
    assert "| characterize: switch: 12 ports \\| build | 55 | 40 |" in text
    assert "run 2/4" not in text                      # under 1 s of CPU: left out


def test_unfinished_run_is_refused():
    run = {"venv": {"wall": 1.0, "cpu": 1.0, "exit": 0}, "run": {"wall": 5.0, "cpu": 5.0, "exit": 2}}
    with pytest.raises(ValueError, match="did not finish"):
        runtime.report(run, LOG)


def test_the_step_lines_printed_are_the_ones_read():
    buf = io.StringIO()
    prog = Progress(2, stream=buf)
    prog.step("cell R: regression")
    prog.note("switch: build")
    lines = buf.getvalue().splitlines()
    assert all(runtime.STEP.match(ln) for ln in lines), lines
    from fred import run as fred_run
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fred_run._Steps(4).step("emit Verilog")
    assert runtime.STEP.match(out.getvalue().strip()), out.getvalue()


def test_bad_arguments_are_one_line(capsys, tmp_path):
    assert runtime.main(["--frm"]) == 2
    assert runtime.main(["--from", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(e.startswith("fred: error: ") for e in err)
