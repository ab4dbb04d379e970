"""Formal proofs (sim/formal*.py, docs/formal.md): one property proved on one cell and on
FRED_2(4), the same properties failing on broken designs (a proof that cannot fail proves
nothing), and (regress) every property on every design, as ``make formal`` runs them."""

from pathlib import Path

import pytest

from fred.hdl.netlist.modes import RDMode, RMode
from fred.sim.formal import suite as formal
from fred.sim.formal.cells import CellHarness, cell_flows
from fred.sim.formal.fabric import FabricHarness, flow_paths
from fred.sim.formal.switch import ActivationHarness, InputPortHarness, OutputPortHarness
from fred.sim.formal.runner import check


#: cycles the activate-early mutant needs to start a phase without input 0's packet (a table
#: write, a header at another input, the scanner's latch, the start)
ACTIVATE_EARLY_DEPTH = 10


@pytest.mark.regress
def test_routing_proved_on_rd_cell(tmp_path):
    """The RD cell (int32, 1 lane) in SUM_BOTH: each sum reaches both outputs, in order, with
    the lane-wise wrapping sum of its inputs -- proved by induction."""
    h = CellHarness("rd", "int32", 1, RDMode.SUM_BOTH, "routing")
    r = check(h, tmp_path, "rd_sum_both_routing", mode="prove", depth=4)
    assert r.status == "proved", r.describe()


@pytest.mark.regress
def test_corrupt_lane_fault_fails_the_proof(tmp_path):
    """``fault="corrupt-lane"`` flips a bit of every sum: the same routing property fails with a
    counterexample trace."""
    h = CellHarness("rd", "int32", 1, RDMode.SUM_BOTH, "routing", fault="corrupt-lane")
    r = check(h, tmp_path, "rd_sum_both_routing_fault", mode="prove", depth=4)
    assert r.status == "failed", r.describe()
    assert r.trace and (tmp_path.parent / r.trace).is_file()


def test_flows_follow_the_modes():
    assert [(f.inputs, f.outputs, f.sum) for f in cell_flows("r", RMode((1, 0)))] == \
        [((0,), (1,), False), ((1,), (0,), False)]
    assert [(f.inputs, f.outputs) for f in cell_flows("rd", RDMode.BCAST1)] == [((1,), (0, 1))]
    with pytest.raises(ValueError, match="unknown property group 'x'"):
        CellHarness("rd", "int32", 1, RDMode.PASS, "x")


@pytest.mark.regress
def test_make_formal_proves_everything(tmp_path):
    """Every property on every design and mode (make formal)."""
    assert formal.main(["--out", str(tmp_path), "--jobs", "2"]) == 0
    text = (Path(tmp_path) / "formal.txt").read_text()
    assert "FAILED" not in text and "unknown" not in text


@pytest.mark.regress
def test_credit_twice_fault_fails_the_switch_port_check(tmp_path):
    """The switch's ``credit-twice`` mutant between an input port and its sender: the credit
    bound fails by bounded model checking within 6 cycles."""
    r = check(InputPortHarness(fault="credit-twice"), tmp_path, "inport_credit_twice",
              mode="bmc", depth=6)
    assert r.status == "failed", r.describe()


@pytest.mark.regress
def test_switch_phase_activation_proved(tmp_path):
    """The whole switch (3 ports, ideal fabric, online routing on): a table or online round
    starts only when every input it takes holds its packet's head -- proved by induction."""
    a = formal.SWITCH_ACTIVATION
    r = check(ActivationHarness(**a), tmp_path, "switch_activation", mode="prove",
              depth=formal.SWITCH_ACTIVATION_K)
    assert r.status == "proved", r.describe()


@pytest.mark.regress
def test_activate_early_fault_fails_the_activation_check(tmp_path):
    """``Switch(fault="activate-early")`` (a phase starts without waiting for input port 0's
    packet): the activation property fails by bounded model checking."""
    a = formal.SWITCH_ACTIVATION
    r = check(ActivationHarness(**a, fault="activate-early"), tmp_path, "switch_activation_fault",
              mode="bmc", depth=ACTIVATE_EARLY_DEPTH)
    assert r.status == "failed", r.describe()
    assert r.trace


@pytest.mark.regress
def test_output_port_queued_rounds_never_overrun_credits(tmp_path):
    """An output port holding 3 rounds (2 queued, each reserving its credits) never sends a flit
    its receiver has no room for, and its reservations never exceed its credits: bounded model
    checking to the suite's depth."""
    r = check(OutputPortHarness(**formal.SWITCH_OUTPUT), tmp_path, "switch_outport_credits",
              mode="bmc", depth=formal.SWITCH_OUTPUT_DEPTH)
    assert r.status == "bounded", r.describe()


@pytest.mark.regress
def test_output_port_without_reservation_fails_the_credit_check(tmp_path):
    """A control unit that starts rounds on the credits held, forgetting what the queued rounds
    reserved: the credit check fails within 8 cycles."""
    r = check(OutputPortHarness(**formal.SWITCH_OUTPUT, fault="no-reservation"), tmp_path,
              "switch_outport_no_reservation", mode="bmc", depth=8)
    assert r.status == "failed", r.describe()
    with pytest.raises(ValueError, match="unknown output-port fault 'x'"):
        OutputPortHarness(fault="x")


# ---- the fabric: FRED_2(4), int32, a reduce (0, 1 -> 2) beside a multicast (2 -> 0, 1) -----------

FABRIC_FLOWS = ["0,1>2", "2>0,1"]


@pytest.mark.regress
def test_fabric_reduce_routing_proved(tmp_path):
    """The reduce's sums reach output 2 in order, each the wrapping sum of the picked beats of
    inputs 0 and 1 -- proved by induction."""
    h = FabricHarness(4, 2, 1, "int32", FABRIC_FLOWS, "routing", track=(2,))
    r = check(h, tmp_path, "fabric_reduce_routing", mode="prove", depth=formal.FABRIC_K)
    assert r.status == "proved", r.describe()


@pytest.mark.regress
def test_fabric_corrupt_lane_fails_the_routing_proof(tmp_path):
    h = FabricHarness(4, 2, 1, "int32", FABRIC_FLOWS, "routing", track=(2,), fault="corrupt-lane")
    r = check(h, tmp_path, "fabric_reduce_routing_fault", mode="prove", depth=formal.FABRIC_K)
    assert r.status == "failed", r.describe()


@pytest.mark.regress
def test_fabric_wrong_config_fails_conservation(tmp_path):
    """The fabric configured for 0 -> 1, 1 -> 0 (and 2, 3 crossed) while the property expects
    0 -> 0, 1 -> 1: a beat appears where none was sent."""
    h = FabricHarness(4, 2, 1, "int32", ["0>0", "1>1"], "conservation",
                      config_flows=["0>1", "1>0", "2>3", "3>2"])
    r = check(h, tmp_path, "fabric_wrong_config", mode="prove", depth=formal.FABRIC_K)
    assert r.status == "failed", r.describe()


def test_fabric_paths_follow_the_routing():
    from fred.hdl.routing.compiler import route
    from fred.hdl.netlist.flows import parse_flow

    res = route(4, 2, [parse_flow(f) for f in FABRIC_FLOWS])
    paths = flow_paths(res)
    assert sorted(paths) == [(0, 0, 2), (0, 1, 2), (1, 2, 0), (1, 2, 1)]
    for path in paths.values():   # R (or the demuxing input cell), RD, D: three cells each
        assert [c.stage for c, *_ in path] == ["in", "rd", "out"]
    # the reduce joins in the R cell of inputs 0 and 1 (a sum on datapath A)
    first = paths[(0, 0, 2)][0]
    assert first[0].stage == "in" and first[4].sum and first[4].datapath == "A"
    with pytest.raises(ValueError, match="unknown property group 'x'"):
        FabricHarness(4, 2, 1, "int32", FABRIC_FLOWS, "x")
