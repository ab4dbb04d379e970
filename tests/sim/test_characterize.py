"""The embedded default timing file is what the RTL produces (so it cannot drift), and the
characterization command rejects bad input with one line."""

import json
import random

import pytest

from fred.cli import main as fred_main
from fred.contract.timing import FLOW_KINDS, load_timing
from fred.contract.timing import summarize
from fred.sim.characterize.run import DEFAULTS, chiplet_name

REGEN = "regenerate with: fred characterize -o contract/data/timing-default.json"


@pytest.fixture(scope="module")
def default():
    return load_timing()


def test_default_is_the_default_configuration(default):
    rtl = default.rtl
    assert (rtl["dtype"], rtl["lanes"], rtl["middle"]) == \
        (DEFAULTS["dtype"], DEFAULTS["lanes"], DEFAULTS["middle"]), REGEN
    names = [chiplet_name(DEFAULTS["middle"], P) for P in DEFAULTS["chiplets"]]
    assert sorted(default.fabrics) == sorted(names), REGEN
    assert default.data["seed"] == DEFAULTS["seed"]
    assert set(default.data["cells"]) == {"R", "D", "RD"}


def test_summary_follows_from_the_measurements(default):
    assert summarize(default.data) == default.summary, REGEN


def test_default_matches_rtl_contracts(default):
    """Cheap structural checks: latency contracts of the cells and chiplets as the RTL states
    them today equal what the file recorded and measured."""
    from fred.hdl.cells.microswitches import cell_latency
    from fred.hdl.fabric.recursive import fabric_latency
    from fred.hdl.netlist.structure import stages

    m, lanes, dt = DEFAULTS["middle"], DEFAULTS["lanes"], DEFAULTS["dtype"]
    for kind, rec in default.data["cells"].items():
        assert rec["latency_contract"] == cell_latency(dt), (kind, REGEN)
        assert rec["latency_cycles"] == rec["latency_contract"], (kind, REGEN)
        assert rec["beats_per_cycle_per_port"] == 1.0, (kind, REGEN)
    for P in DEFAULTS["chiplets"]:
        f = default.fabrics[chiplet_name(m, P)]
        assert f["stages"] == stages(P), REGEN
        assert f["latency_contract"] == fabric_latency(P, m, lanes, dt), REGEN
        for kind in FLOW_KINDS:
            assert f["latency_cycles"][kind] == f["latency_contract"], (P, kind, REGEN)
            assert f["beats_per_cycle_per_port"][kind] == 1.0, (P, kind, REGEN)


def test_rtl_still_produces_the_default(default):
    """Re-measure what the model uses (latency per flow kind, beats/cycle/port at zero
    back-pressure) on the L1 chiplet, FRED_3(12), from today's RTL, on the compiled path (the
    bench fred characterize runs; tests/sim/test_fabric_sim.py shows it equal to cocotb's). One
    lane: every lane has the same pipeline, so cycles and beats/cycle do not depend on the lane
    count (the regress test below re-measures at the default lane count)."""
    from fred.sim.characterize.fabric import KINDS, kind_flows, run_fabric

    m, dt = DEFAULTS["middle"], DEFAULTS["dtype"]
    P = max(DEFAULTS["chiplets"])
    rec = default.fabrics[chiplet_name(m, P)]
    rng = random.Random(DEFAULTS["seed"])
    phases = [kind_flows(k, P, rng) for k in KINDS]
    res = run_fabric(P, m, 1, dt, phases, seed=DEFAULTS["seed"], beats=32, labels=list(KINDS),
                     specials=False, backend="compiled")
    for kind, ph in zip(KINDS, res["phases"]):
        assert ph["latency"]["max"] == rec["latency_cycles"][kind], (kind, REGEN)
        rate = min(list(ph["out_rate"].values()) + list(ph["in_rate"].values()))
        assert rate == pytest.approx(rec["beats_per_cycle_per_port"][kind]), (kind, REGEN)


def test_default_switch_is_the_wafer_chiplet(default):
    """The switch figures the model uses (phase switch, preemption, overhead) were measured on a
    switch of the largest chiplet's size with the paper's 8-flit packets, as DEFAULTS says."""
    from fred.hdl.fabric.recursive import fabric_latency
    from fred.sim.characterize.run import _switch_params

    cfg = dict(DEFAULTS)
    _switch_params(cfg)
    assert cfg["switch_ports"] == max(DEFAULTS["chiplets"])
    p = default.data["switch"]["params"]
    assert (p["ports"], p["max_len"]) == (cfg["switch_ports"], cfg["switch_packet_flits"]), REGEN
    assert p["fabric_latency"] == fabric_latency(cfg["switch_ports"], DEFAULTS["middle"],
                                                 DEFAULTS["lanes"], DEFAULTS["dtype"]), REGEN
    assert default.data["switch"]["preemption_cycles"]["samples"] == \
        DEFAULTS["switch_preemptions"], REGEN


@pytest.mark.regress
def test_full_recharacterization_matches_default(default, tmp_path):
    """Everything deterministic in the default: figures per chiplet and cell, the load sweep
    (reproducible from the seed, tests/model/test_load_sweep_repro.py), the switch figures, and area."""
    out = tmp_path / "t.json"
    assert fred_main(["characterize", "-o", str(out), "-q"]) == 0
    new = json.loads(out.read_text())
    old = default.data
    assert new["summary"] == old["summary"], REGEN
    for name, f in old["fabrics"].items():
        g = new["fabrics"][name]
        for key in ("latency_cycles", "beats_per_cycle_per_port", "latency_range", "stages",
                    "load_sweep", "area", "verilog_sha256"):
            assert g[key] == f[key], (name, key, REGEN)
    for name, c in old["cells"].items():
        for key in ("latency_cycles", "beats_per_cycle_per_port", "area", "verilog_sha256"):
            assert new["cells"][name][key] == c[key], (name, key, REGEN)
    strip = lambda sw: {k: v for k, v in sw.items() if k != "runtime_s"}
    assert strip(new["switch"]) == strip(old["switch"]), REGEN


@pytest.mark.parametrize("argv,needle", [
    (["--chiplets", "twelve"], "--chiplets 'twelve' is not a whole number"),
    (["--chiplets", ","], "--chiplets ',' names nothing"),
    (["--beats", "1"], "--beats 1 is too small"),
    (["--cell-beats", "-1"], "--cell-beats -1 is too small"),
    (["--chiplets", "1"], "--chiplets 1 is too small"),
    (["--lanes", "0"], "--lanes 0 is too small"),
    (["--area", "gates"], "invalid choice"),
    (["--switch-ports", "3"], "--switch-ports 3 is too small: must be >= 4"),
    (["--switch-packet-flits", "0"], "--switch-packet-flits 0 is too small"),
])
def test_characterize_bad_input(tmp_path, capsys, argv, needle):
    rc = fred_main(["characterize", "-o", str(tmp_path / "x.json"), "-q", *argv])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fred: error:") and len(err.splitlines()) == 1
    assert needle in err
    assert not (tmp_path / "x.json").exists()


def test_switch_flit_narrower_than_header_refused_before_any_bench(monkeypatch):
    """1 x int32 = a 32-bit flit cannot carry the 48-bit header: refused up front, not after the
    cell and fabric benches have run."""
    import fred.sim.characterize.run as ch

    def no_bench(*a, **k):
        raise AssertionError("a bench ran before the parameters were checked")

    monkeypatch.setattr(ch, "_cell_figures", no_bench)
    monkeypatch.setattr(ch, "_fabric_figures", no_bench)
    with pytest.raises(ValueError, match=r"lanes 1 x int32 is a 32-bit flit.*48-bit header"):
        ch.characterize(lanes=1, dtype="int32", progress=False)
