"""Area at real width (fred.hdl.physical.area_hier): each distinct module once, times its instances;
memories as SRAM macros; gate equivalents; the timing file's area_at_width section."""

import copy

import pytest

from fred.contract.timing import TimingFileError, load_timing, validate_timing
from fred.hdl.physical.area import synth_area
from fred.hdl.physical.area_hier import (AREA_SOURCES, GE_UM2, GE_WEIGHTS, LEF_WIDTH_UM, ROW_HEIGHT_UM, SRAM_UM2_PER_BIT,
                                 gate_equivalents, hier_area, instance_counts, module_tree)
from fred.hdl.fabric.recursive import fabric_verilog_text
from fred.hdl.fabric.hier import emit_modules
from fred.hdl.netlist.structure import cell_counts
from fred.hdl.switch.buffers import VCBuffer
from fred.hdl.verilog import emit


@pytest.mark.regress
def test_instance_counts_follow_the_structure():
    """Only make regress-synth runs it: make test runs no yosys (tests/conftest.py
    REGRESS_TESTS)."""
    text = fabric_verilog_text(12, 3, 3, "fp16", "top", form="hier")
    _, children = module_tree(text)
    n = instance_counts(children, "top")
    c = cell_counts(12, 3)
    assert n["fred_r_m3_l3_fp16"] == c["R"] and n["fred_d_m3_l3_fp16"] == c["D"]
    assert n["fred_rd_l3_fp16"] == c["RD"] and n["fred_demux_m3_l3_fp16_lat3"] == c["DEMUX"]
    assert n["fred_add_fp16"] == 3 * (c["R"] + c["RD"])        # one adder lane per lane of A
    assert n["fred_fabric_m3_p6_l3_fp16"] == 3 and n["fred_fabric_m3_p2_l3_fp16"] == 27


@pytest.mark.regress
def test_hier_area_equals_flattened_synthesis(tmp_path, monkeypatch):
    """FRED_2(3), 1 int32 lane: per-module synthesis x instances == the flat design synthesized
    whole (same flip-flops; cells within 2%: no optimization across module boundaries).
    Only make regress-synth runs it: make test runs no yosys (tests/conftest.py REGRESS_TESTS)."""
    monkeypatch.setenv("FRED_BUILD", str(tmp_path))
    flat = synth_area(fabric_verilog_text(3, 2, 1, "int32", "top", form="flat"), "top")
    h = hier_area(fabric_verilog_text(3, 2, 1, "int32", "top", form="hier"), "top")
    assert h.flipflops == flat.flipflops > 0
    assert abs(h.cells - flat.cells) <= 0.02 * flat.cells
    assert h.sram_bits == 0 and h.logic_mm2 > 0 and h.total_mm2 == h.logic_mm2


@pytest.mark.regress
def test_memories_are_sram_macros_not_flipflops(tmp_path, monkeypatch):
    """Only make regress-synth runs it: make test runs no yosys (tests/conftest.py
    REGRESS_TESTS)."""
    monkeypatch.setenv("FRED_BUILD", str(tmp_path))
    buf = VCBuffer(64, 48)
    h = hier_area(emit_modules(buf, "vcbuf", {}), "vcbuf")
    assert h.sram_bits == 64 * 48
    assert 0 < h.flipflops < 64        # the pointers and counters, not the 3,072 bits
    assert h.sram_mm2 > 0 and h.total_mm2 == pytest.approx(h.logic_mm2 + h.sram_mm2)
    # the same buffer synthesized whole maps its memory to flip-flops
    assert synth_area(emit(VCBuffer(64, 48), "vcbuf")).flipflops >= 64 * 48


def test_gate_equivalents():
    assert gate_equivalents({"$_NAND_": 3, "$_NOT_": 3}) == pytest.approx(3 + 3 * 0.75, rel=1e-9)
    assert gate_equivalents({"$_SDFFE_PP0P_": 1}) > gate_equivalents({"$_DFF_P_": 1})
    with pytest.raises(ValueError, match="no gate-equivalent weight"):
        gate_equivalents({"$_WEIRD_": 1})


def test_area_constants_are_the_sourced_cell_sizes():
    """The NanGate 15 nm OCL LEF sizes (NAND2_X1 0.256 x 0.768 um; INV_X1 0.192, MUX2_X1 0.832,
    DFFRNQ_X1 1.664 um wide) and TSMC's 0.07 um2 16 nm bitcell at 60% array efficiency: the
    conversions are computed from them, each once, and the sources say which are assumed."""
    assert ROW_HEIGHT_UM == 0.768 and LEF_WIDTH_UM["NAND2_X1"] == 0.256
    assert GE_UM2 == pytest.approx(0.196608, abs=1e-12)
    assert (GE_WEIGHTS["NAND"], GE_WEIGHTS["NOT"], GE_WEIGHTS["MUX"], GE_WEIGHTS["XOR"], GE_WEIGHTS["DFF"]) == \
        (1.0, 0.75, 3.25, 2.25, 6.5)
    assert GE_WEIGHTS["DFFE"] == GE_WEIGHTS["DFF"] + GE_WEIGHTS["MUX"]      # enable: a MUX2 in front
    assert SRAM_UM2_PER_BIT == pytest.approx(0.07 / 0.60)
    assert "unverified" in AREA_SOURCES["utilization"] and "unverified" in AREA_SOURCES["sram_um2_per_bit"]
    assert "0.256 x 0.768" in AREA_SOURCES["ge_um2"]


def _area_doc():
    d = copy.deepcopy(load_timing().data)
    d["schema_version"] = 2
    d.pop("link_faults", None)                       # a schema 4 section
    d.pop("all_to_all", None)                        # a schema 5 section
    d["area_at_width"] = {"lanes": 256, "dtype": "fp16", "designs": {"FRED_3(12)": {
        "cells": 10, "flipflops": 2, "ge": 20.5, "logic_mm2": 1.5, "sram_bits": 0, "sram_mm2": 0,
        "total_mm2": 1.5}}}
    return d


def test_timing_schema_2_area_section_and_old_files():
    assert load_timing().schema_version >= 4 and load_timing().area_at_width["lanes"] == 256  # v4+ reads
    d = _area_doc()
    assert validate_timing(d)["area_at_width"]["lanes"] == 256
    bad = _area_doc()
    bad["area_at_width"]["designs"]["FRED_3(12)"]["ge"] = -1
    with pytest.raises(TimingFileError, match="area_at_width.designs.FRED_3"):
        validate_timing(bad)
    old = _area_doc()
    old["schema_version"] = 1
    with pytest.raises(TimingFileError, match="needs schema version 2"):
        validate_timing(old)


def test_width_area_refuses_before_any_work():
    from fred.sim.characterize.area_width import check_width_area, switch_buffers

    check_width_area((12, 10), 3, 256, "fp16", 12)        # the real width fits
    with pytest.raises(ValueError, match="77,253 input bits in one module"):
        check_width_area((12, 10), 3, 400, "fp16", 12)
    with pytest.raises(ValueError, match="smaller than the switch's 48-bit header"):
        check_width_area((4,), 3, 2, "fp16", 4)
    # the design's buffers at a 512-byte flit: 48 data flits (24 KB), 4 control flits (2 KB),
    # 8-flit (4 KB) packets
    assert switch_buffers(256, "fp16") == {"flit_bytes": 512, "data_depth": 48, "ctrl_depth": 4,
                                           "max_len": 8}


def test_characterize_area_lanes_bad_input(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "fred", "characterize", "--area-lanes", "400", "-o",
                        str(tmp_path / "t.json")], capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "--area-lanes 400 (chiplet of 12 ports): FRED_3(12) with 400 fp16 lanes needs" in p.stderr


def _section(lanes, switch=True):
    d = {"cells": 1000, "flipflops": 100, "ge": 2.5e6, "logic_mm2": 0.7, "sram_bits": 0, "sram_mm2": 0,
         "total_mm2": 0.7}
    designs = {"FRED_3(12)": dict(d)}
    sec = {"lanes": lanes, "ge_um2": 0.196608, "placement_utilization": 0.7, "sram_um2_per_bit": 0.1167,
           "assumed_unverified": ["placement_utilization", "sram_array_efficiency"], "designs": designs}
    if switch:
        designs["switch (12 ports)"] = dict(d, sram_bits=8 * 1024 * 890, sram_mm2=0.85, total_mm2=1.55)
        sec["spec"] = {"switch_chiplets_mm2": 25195, "logic_fraction_max": 0.05, "logic_budget_mm2": 1259.75,
                       "switches_in_logic_budget": 812.7, "switch_share_of_spec_total": 1.55 / 25195}
    return sec


def test_area_width_table_and_timing_file_check(tmp_path):
    """The README table of fred.benchmarks.area_width, and its check that a timing file's
    area_at_width section has the figures of the run (a changed figure is named)."""
    import json

    from fred.benchmarks.area_width import compare_timing_file, table

    secs = [_section(256), _section(320, switch=False)]
    text = table(secs)
    assert "| FRED_3(12) | 256 | 1,000 | 100 | 2.50 M | 0.70 | — | — | 0.70 |" in text
    assert "| switch (12 ports) | 256 |" in text and "| FRED_3(12) | 320 |" in text
    assert "**1.6 mm²**" in text and "890 KB" in text and "813 such switches" in text
    assert "FRED_3(12) chiplet's switching logic is **0.7 mm²**, 0.003% of" in text
    assert "unverified: placement_utilization, sram_array_efficiency" in text
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"area_at_width": _section(256)}))
    assert "matches this run (2 designs)" in compare_timing_file(f, secs)
    other = _section(256)
    other["designs"]["FRED_3(12)"]["flipflops"] = 101
    f.write_text(json.dumps({"area_at_width": other}))
    assert "DIFFERS" in compare_timing_file(f, secs) and "FRED_3(12).flipflops" in compare_timing_file(f, secs)
    assert "no timing file" in compare_timing_file(tmp_path / "none.json", secs)


def test_area_width_embed_into_a_timing_file(tmp_path):
    """embed() puts one section of a run's JSON into a timing file (the embedded default here),
    with the run that measured it; the result loads; a width the run lacks is named."""
    import json

    from fred.benchmarks.area_width import embed

    runs = tmp_path / "area-width.json"
    runs.write_text(json.dumps([dict(_section(256), dtype="fp16"), dict(_section(320, switch=False), dtype="fp16")]))
    out = tmp_path / "t.json"
    sec = embed(runs, 320, None, out, "python -m fred.bench area-width, revision abc")
    t = load_timing(out)
    assert t.area_at_width["lanes"] == 320 and t.area_at_width["measured_by"].endswith("revision abc")
    assert t.area_at_width["designs"]["FRED_3(12)"]["flipflops"] == sec["designs"]["FRED_3(12)"]["flipflops"]
    assert t.data["cells"] == load_timing().data["cells"]          # the rest is the file it started from
    with pytest.raises(ValueError, match="no section at 64 lanes .it has 256, 320"):
        embed(runs, 64, None, out, "x")


def test_readme_area_table_is_the_embedded_timing_files():
    """The README's area-at-width rows at the width of the embedded default's area_at_width
    section are that section's figures (both from one run of the bench: fred.bench area-width,
    then embed())."""
    import re
    from pathlib import Path

    sec = load_timing().area_at_width
    assert sec is not None and sec["lanes"] == 256 and "measured_by" in sec
    assert {"cell R", "cell D", "cell RD", "FRED_3(12)", "FRED_3(10)", "switch (12 ports)"} <= set(sec["designs"])
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("<!-- area-width:begin -->", 1)[1].split("<!-- area-width:end -->", 1)[0]
    rows = {}
    for m in re.finditer(r"^\| ([^|]+?) \| (\d+) \| ([\d,]+) \| ([\d,]+) \|", block, re.M):
        rows[(m.group(1), int(m.group(2)))] = (int(m.group(3).replace(",", "")), int(m.group(4).replace(",", "")))
    for name, d in sec["designs"].items():
        assert rows[(name, sec["lanes"])] == (d["cells"], d["flipflops"]), name
