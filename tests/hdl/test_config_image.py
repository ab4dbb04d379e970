"""The configuration image of ``fred route --json`` (hdl/fabric/image.py): the flat word the
fabric's ``cfg`` port takes and each cell's field in it, checked against the documented
depth-first packing and driven as given into the Verilog fabric under Verilator."""

import json

import pytest

from fred.cli import main as fred_main
from fred.hdl.fabric.recursive import config_bits
from fred.hdl.routing.compiler import route
from fred.sim.characterize.fabric import run_fabric


def _route_json(capsys, P, m, flows):
    argv = ["route", "--ports", str(P), "--middle", str(m), "--json"]
    for f in flows:
        argv += ["--flow", f]
    assert fred_main(argv) == 0
    return json.loads(capsys.readouterr().out)["results"][0]


def _documented_order(path, P, m):
    """docs/fabric.md: in0..in{r-1}, demux (odd P), out0..out{r-1}, mux (odd P), then middle
    copies 0..m-1 recursively; the rd cell when P == 2. Written here from the docs, not the code."""
    if P == 2:
        return [(path, "rd", 0)]
    r = P // 2
    cells = [(path, "in", j) for j in range(r)] + ([(path, "demux", 0)] if P % 2 else [])
    cells += [(path, "out", j) for j in range(r)] + ([(path, "mux", 0)] if P % 2 else [])
    for k in range(m):
        cells += _documented_order(path + (k,), (P + 1) // 2, m)
    return cells


@pytest.mark.parametrize("P,m,flows", [(5, 2, ["0,1>2", "3>0,4"]), (8, 3, ["0-7>0-7"]),
                                        (12, 3, ["0-3>4", "5>6-11", "4>0"])])
def test_route_json_config_image(capsys, P, m, flows):
    ph = _route_json(capsys, P, m, flows)
    word, width = int(ph["config"]["word_hex"], 16), ph["config"]["width_bits"]
    assert len(ph["config"]["word_hex"]) == (width + 3) // 4 and word < 1 << width
    assert word == config_bits(P, m, route(P, m, flows))
    cells = {(tuple(c["path"]), c["stage"], c["index"]): c for c in ph["cells"]}
    order = _documented_order((), P, m)
    assert sorted(order) == sorted(cells)
    off = 0
    for key in order:  # contiguous, depth-first, first cell in the low bits
        c = cells[key]
        assert c["config_offset_bits"] == off, (key, c["config_offset_bits"], off)
        mask = (1 << c["config_width_bits"]) - 1
        assert (word >> off) & mask == c["config_value"], key
        off += c["config_width_bits"]
    assert off == width
    # a used cell has a non-idle field somewhere: the word is not all zero for a routed phase
    assert word != 0


def test_route_json_word_drives_the_fabric(capsys):
    """Each phase's ``word_hex`` from ``fred route --json``, driven as given into ``cfg`` of the
    emitted fabric (Verilator), carries exactly the routed flows (bit-exact against the golden
    model); the words of two phases swapped make the bench fail."""
    P, m = 3, 2
    phases = [["0,1>2"], ["0>1", "1>0", "2>2"], ["2>0,1"]]
    words = [_route_json(capsys, P, m, ph)["config"]["word_hex"] for ph in phases]
    assert len(set(words)) == len(words)
    res = run_fabric(P, m, 2, "bf16", phases, config_words=words, seed=11, beats=12, stall=0.2)
    assert len(res["phases"]) == len(phases)
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        run_fabric(P, m, 2, "bf16", phases[:2], config_words=words[1::-1], seed=11, beats=8)
