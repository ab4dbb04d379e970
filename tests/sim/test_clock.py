"""Clock figures (issue 13 item 5): gate levels per pipeline stage (hdl/physical/depth.py), the
ECP5 place-and-route fmax (hdl/physical/fpga.py), the timing file's optional ``clock`` section and
``fred timing``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fred.contract.timing import TimingFileError, load_timing, validate_timing
from fred.hdl.cells.microswitches import build_cell
from fred.hdl.physical.fpga import parse_report
from fred.hdl.physical.depth import depth_from_netlist, logic_depth, parse_ltp, stage_name
from fred.hdl.verilog import emit
from fred.sim.characterize.clock import limiting

DATA = Path(__file__).resolve().parents[1] / "data"


# ---- nextpnr report ----------------------------------------------------------------------------

def test_parse_stored_nextpnr_report():
    """A stored nextpnr-ecp5 --report of the R cell (fp16 x 4; critical path trimmed to 5 of
    its segments): fmax, critical-path ends, delay split and utilization read from it."""
    rep = json.loads((DATA / "nextpnr-report-r-fp16.json").read_text())
    f = parse_report(rep, "fred_r_m3_l4_fp16")
    assert f.fmax_mhz == pytest.approx(rep["fmax"]["clk"]["achieved"])
    segs = rep["critical_paths"][0]["path"]
    assert f.path_from == segs[0]["from"]["cell"] and f.path_to == segs[-1]["to"]["cell"]
    assert f.path_ns == pytest.approx(sum(s["delay"] for s in segs))
    assert f.routing_ns + f.logic_ns == pytest.approx(f.path_ns)
    assert f.routing_ns == pytest.approx(sum(s["delay"] for s in segs if s["type"] == "routing"))
    assert f.luts == rep["utilization"]["TRELLIS_COMB"]["used"]
    assert f.flipflops == rep["utilization"]["TRELLIS_FF"]["used"]


def test_parse_report_slowest_clock_and_no_fmax():
    rep = {"fmax": {"a": {"achieved": 300.0, "constraint": 250}, "b": {"achieved": 120.5, "constraint": 250}},
           "utilization": {}, "critical_paths": []}
    assert parse_report(rep).fmax_mhz == 120.5
    with pytest.raises(RuntimeError, match="no achieved fmax"):
        parse_report({"fmax": {}, "utilization": {}})


# ---- gate levels on a netlist ------------------------------------------------------------------

def _netlist():
    """in a, b -> r1 = DFF(a & b) -> r2 = DFF(~r1 ^ b) [2 levels]; y = r2 | a [1 level]."""
    cells = {
        "g1": {"type": "$_AND_", "connections": {"A": [2], "B": [3], "Y": [10]}},
        "f1": {"type": "$_DFF_P_", "connections": {"C": [1], "D": [10], "Q": [11]}},
        "g2": {"type": "$_NOT_", "connections": {"A": [11], "Y": [12]}},
        "g3": {"type": "$_XOR_", "connections": {"A": [12], "B": [3], "Y": [13]}},
        "f2": {"type": "$_SDFFE_PP0P_", "connections": {"C": [1], "D": [13], "E": [2], "R": [3],
                                                        "Q": [14]}},
        "g4": {"type": "$_OR_", "connections": {"A": [14], "B": [2], "Y": [15]}},
    }
    nets = {"clk": {"bits": [1]}, "a": {"bits": [2]}, "b": {"bits": [3]},
            "x.lane3.r1": {"bits": [11], "hide_name": 0}, "$abc$n1": {"bits": [11], "hide_name": 1},
            "x.lane3.r2": {"bits": [14], "hide_name": 0}, "y": {"bits": [15]}}
    ports = {"clk": {"direction": "input", "bits": [1]}, "a": {"direction": "input", "bits": [2]},
             "b": {"direction": "input", "bits": [3]}, "y": {"direction": "output", "bits": [15]}}
    return {"modules": {"t": {"cells": cells, "netnames": nets, "ports": ports}}}


def test_depth_from_netlist_counts_levels_per_register():
    levels, stage, start, stages, gates, ffs = depth_from_netlist(_netlist(), "t")
    assert (levels, stage, start) == (2, "x.lane*.r2", "x.lane*.r1")
    assert stages == {"x.lane*.r2": 2, "x.lane*.r1": 1, "output y": 1}
    assert (gates, ffs) == (4, 2)


def test_stage_name_and_ltp_parse():
    assert stage_name("\\A_add.lane2.r2_e [5]") == "A_add.lane*.r2_e"
    assert parse_ltp("x\nLongest topological path in fred_r (length=45):\n 0: a") == 45
    assert parse_ltp("nothing") is None


@pytest.mark.regress
def test_logic_depth_small_cell_matches_yosys_ltp():
    """One real run (R cell, int32 x 1 lane, a few seconds): our level count of the deepest
    path equals yosys' own ``ltp -noff``, and it ends at a named register or output.
    Only make regress-synth runs it: make test runs no yosys (tests/conftest.py REGRESS_TESTS)."""
    cell = build_cell("r", middle=2, lanes=1, dtype="int32")
    d = logic_depth(emit(cell, cell.verilog_name), cell.verilog_name)
    assert d.ltp_levels is not None and d.levels == d.ltp_levels
    assert d.levels >= 5 and d.flipflops > 0 and d.gates > d.levels
    assert d.stages[d.limiting_stage] == d.levels
    assert not d.limiting_stage.startswith("$")


def test_logic_depth_bad_input():
    with pytest.raises(ValueError, match="needs Verilog"):
        logic_depth("  ")
    with pytest.raises(ValueError, match="unknown synthesis method"):
        logic_depth("module a(); endmodule", method="fast")


# ---- timing file clock section -------------------------------------------------------------------

def _section():
    cell = {"levels": 45, "limiting_stage": "A_add.lane*.r2_e"}
    sec = {"middle": 3, "lanes": 4,
           "gate_levels": {"cells": {"r": {"fp16": dict(cell)}, "d": {"fp16": dict(cell, levels=9)}},
                           "fabrics": {"FRED_3(12)": dict(cell, levels=50, limiting_stage="x")}},
           "fpga": {"device": "LFE5UM5G-85F", "cells": {"r": {"fp16": {"fmax_mhz": 112.5}}},
                    "fabrics": {"FRED_3(12)": {"fmax_mhz": 98.0}}}}
    sec["limiting"] = limiting(sec)
    return sec


def test_limiting_picks_deepest_and_slowest():
    lim = _section()["limiting"]
    assert lim == {"gate_levels": 50, "gate_levels_design": "FRED_3(12)", "gate_levels_stage": "x",
                   "fpga_fmax_mhz": 98.0, "fpga_fmax_design": "FRED_3(12)"}


def test_timing_file_clock_section_optional_and_checked(tmp_path):
    base = load_timing()
    assert base.clock is None or isinstance(base.clock, dict)
    doc = copy.deepcopy(base.data)
    doc["clock"] = _section()
    validate_timing(doc)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    assert load_timing(p).clock["limiting"]["fpga_fmax_mhz"] == 98.0
    for path, value, msg in ((("gate_levels", "cells", "r", "fp16", "levels"), -1, "levels"),
                             (("fpga", "fabrics", "FRED_3(12)", "fmax_mhz"), 0, "fmax_mhz"),
                             (("fpga", "cells", "r", "fp16", "fmax_mhz"), 1e9, "too large"),
                             (("gate_levels", "fabrics", "FRED_3(12)", "limiting_stage"), 3, "wrong type")):
        bad = copy.deepcopy(doc)
        node = bad["clock"]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        with pytest.raises(TimingFileError, match=msg):
            validate_timing(bad, "bad.json")
    bad = copy.deepcopy(doc)
    del bad["clock"]["gate_levels"]
    with pytest.raises(TimingFileError, match="clock.gate_levels"):
        validate_timing(bad, "bad.json")


# ---- the embedded default and fred timing --------------------------------------------------------

def test_embedded_default_has_clock_section():
    """contract/data/timing-default.json carries the measured clock section: every cell kind x
    dtype, FRED_3(12), the ltp cross-check held, and its `limiting` is what the data says."""
    c = load_timing().clock
    assert c is not None, "regenerate with: fred timing --timing default -o contract/data/timing-default.json"
    for part in ("gate_levels", "fpga"):
        cells = c[part]["cells"]
        assert set(cells) == {"r", "d", "rd"}
        assert all(set(v) == {"int32", "fp16", "bf16", "fp32"} for v in cells.values())
        assert "FRED_3(12)" in c[part]["fabrics"]
    for by in c["gate_levels"]["cells"].values():
        for rec in by.values():
            assert rec["levels"] == rec["ltp_levels"] > 0
    assert limiting(c) == c["limiting"]


@pytest.mark.regress
def test_fred_timing_gate_levels_only(tmp_path, capsys):
    """fred timing --no-fpga on int32 x 1 lane cells, no fabric: writes the timing file with the
    clock section and prints it as JSON.
    Only make regress-synth runs it: make test runs no yosys (tests/conftest.py REGRESS_TESTS)."""
    from fred.cli import main

    out = tmp_path / "t.json"
    assert main(["timing", "--no-fpga", "--fabric-ports", "0", "--dtypes", "int32", "--lanes", "1",
                 "-o", str(out), "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "fred-timing-clock" and doc["output"] == str(out)
    clock = load_timing(out).clock
    assert clock == doc["results"][0]
    assert set(clock["gate_levels"]["cells"]) == {"r", "d", "rd"} and "fpga" not in clock
    assert clock["lanes"] == 1 and clock["gate_levels"]["fabrics"] == {}


@pytest.mark.regress
def test_embedded_clock_section_reproduces():
    """Re-measure the R cell fp16 (gate levels and ECP5 fmax; yosys and nextpnr are
    deterministic for one seed) and compare with the embedded default."""
    from fred.sim.characterize.clock import measure_clock

    c = load_timing().clock
    new = measure_clock(dtypes=("fp16",), kinds=("r",), fabric_ports=0)
    old_d, new_d = c["gate_levels"]["cells"]["r"]["fp16"], new["gate_levels"]["cells"]["r"]["fp16"]
    assert (new_d["levels"], new_d["limiting_stage"]) == (old_d["levels"], old_d["limiting_stage"])
    assert new["fpga"]["cells"]["r"]["fp16"]["fmax_mhz"] == pytest.approx(
        c["fpga"]["cells"]["r"]["fp16"]["fmax_mhz"], rel=1e-5)
