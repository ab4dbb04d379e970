"""ports, middle and lanes: one check (fred.hdl.params), one wording, in every block."""

import pytest

from fred.hdl.adders import VectorAdder
from fred.hdl.cells.microswitches import DCell, RCell, RDCell, build_cell
from fred.hdl.crossbar import Crossbar
from fred.hdl.fabric.recursive import Fabric, check_fabric_params
from fred.hdl.netlist.modes import (DemuxMode, DMode, MuxMode, RDMode, RMode, mode_from_json,
                            mode_to_json)
from fred.hdl.cells.muxes import DemuxCell, MuxCell
from fred.hdl.routing.compiler import route
from fred.hdl.netlist.structure import Netlist
from fred.hdl.switch.top import Switch

#: every constructor that takes lanes, called with a given lanes value
LANES = {
    "RCell": lambda x: RCell(3, x, "fp16"),
    "DCell": lambda x: DCell(3, x, "fp16"),
    "RDCell": lambda x: RDCell(x, "fp16"),
    "DemuxCell": lambda x: DemuxCell(3, x, "fp16", 3),
    "MuxCell": lambda x: MuxCell(3, x, "fp16", 3),
    "Fabric": lambda x: Fabric(4, 3, x, "fp16"),
    "Switch": lambda x: Switch(4, 3, x, "int32", fabric="ideal"),
    "Crossbar": lambda x: Crossbar(4, x, "fp16"),
    "VectorAdder": lambda x: VectorAdder("fp16", x),
    "check_fabric_params": lambda x: check_fabric_params(4, 3, x, "fp16"),
}
#: every constructor or function that takes middle
MIDDLE = {
    "RCell": lambda x: RCell(x, 4, "fp16"),
    "DCell": lambda x: DCell(x, 4, "fp16"),
    "build_cell rd": lambda x: build_cell("rd", middle=x),
    "DemuxCell": lambda x: DemuxCell(x, 4, "fp16", 3),
    "MuxCell": lambda x: MuxCell(x, 4, "fp16", 3),
    "Fabric": lambda x: Fabric(4, x, 4, "fp16"),
    "Switch": lambda x: Switch(4, x, 4, "fp16"),
    "Netlist": lambda x: Netlist(8, x),
    "route": lambda x: route(8, x, ["0>1"]),
    "RCell.config_layout": lambda x: RCell.config_layout(x),
}
#: every constructor or function that takes ports (lower bound 2)
PORTS = {
    "Fabric": lambda x: Fabric(x, 3, 4, "fp16"),
    "Switch": lambda x: Switch(x, 3, 4, "fp16"),
    "Crossbar": lambda x: Crossbar(x, 4, "fp16"),
    "Netlist": lambda x: Netlist(x, 3),
    "route": lambda x: route(x, 3, ["0>0"]),
}


def _message(make, value, exc):
    with pytest.raises(exc) as e:
        make(value)
    return str(e.value)


@pytest.mark.parametrize("table,name,value,exc,text", [
    (LANES, "lanes", 0, ValueError, "lanes 0 is too small: must be >= 1"),
    (LANES, "lanes", -2, ValueError, "lanes -2 is too small: must be >= 1"),
    (LANES, "lanes", 2.0, TypeError, "lanes must be an integer, not float 2.0"),
    (LANES, "lanes", "4", TypeError, "lanes must be an integer, not str '4'"),
    (LANES, "lanes", 1025, ValueError, "lanes 1025 is too large: must be <= 1024"),
    (MIDDLE, "middle", 1, ValueError, "middle 1 is too small: must be >= 2"),
    (MIDDLE, "middle", True, TypeError, "middle must be an integer, not bool True"),
    (PORTS, "ports", 1, ValueError, "ports 1 is too small: must be >= 2"),
    (PORTS, "ports", "8", TypeError, "ports must be an integer, not str '8'"),
])
def test_one_check_one_wording(table, name, value, exc, text):
    msgs = {who: _message(make, value, exc) for who, make in table.items()}
    for who, msg in msgs.items():
        assert msg.startswith(text), (who, msg)
        assert "\n" not in msg, (who, msg)


def test_upper_port_bounds_say_why():
    for make, high in ((lambda: Fabric(65, 3, 1, "fp16"), 64), (lambda: Crossbar(65, 1), 64),
                       (lambda: Netlist(1025, 3), 1024)):
        with pytest.raises(ValueError) as e:
            make()
        msg = str(e.value)
        assert msg.startswith(f"ports {high + 1} is too large: must be <= {high} (") and \
            msg.endswith(")"), msg


def test_switch_defaults_match_the_cli():
    sw = Switch(4, fabric="ideal", dtype="int32")
    assert (sw.middle, sw.lanes) == (3, 4)
    import inspect
    defaults = {k: v.default for k, v in inspect.signature(Switch).parameters.items()}
    assert defaults["dtype"] == "fp16" and defaults["fabric"] == "fred"


@pytest.mark.parametrize("kind,mode", [
    ("R", RMode((2, None), reduce=True)), ("R", RMode((None, 1))), ("R", RMode()),
    ("D", DMode((1, 1))), ("D", DMode((0, None))), ("RD", RDMode.SUM_BOTH), ("RD", RDMode.PASS),
    ("DEMUX", DemuxMode(2)), ("DEMUX", DemuxMode(None)), ("MUX", MuxMode(0)),
])
def test_mode_json_round_trip(kind, mode):
    obj = mode_to_json(mode)
    assert mode_from_json(kind, obj) == mode
    assert mode_from_json(kind.lower(), obj) == mode      # the cell benches' kind names


def test_mode_json_form_and_errors():
    assert mode_to_json(RMode((0, None), reduce=True)) == {"sel": [0, None], "reduce": True}
    assert mode_to_json(DMode((1, 1))) == {"src": [1, 1], "broadcast": True}
    assert mode_to_json(RDMode.SUM_BOTH) == "sum_both"
    with pytest.raises(ValueError, match="broadcast does not match src"):
        mode_from_json("D", {"src": [0, 1], "broadcast": True})
    with pytest.raises(ValueError, match=r"R cell mode \{'src': \[0, 1\]\} is not valid JSON"):
        mode_from_json("R", {"src": [0, 1]})
    with pytest.raises(ValueError, match="unknown cell kind 'X'"):
        mode_from_json("X", {})
    with pytest.raises(TypeError, match="not a cell mode"):
        mode_to_json("pass")
