"""The Python API refuses bad parameters the way the CLI does (issue 12): ``TypeError`` for a
wrong type, ``ValueError`` (one line naming the parameter and the value) for a wrong value, via
fred.contract.checks, before any work."""

from __future__ import annotations

import pytest

from fred.hdl.netlist.flows import parse_flow, parse_ports
from fred.model.collectives.api import collective_time
from fred.model.training.estimator import estimate
from fred.model.network.from_yaml import NetworkSpec


@pytest.mark.parametrize("kw, exc, match", [
    ({"microbatches": "4"}, TypeError, "microbatches must be an integer, not str '4'"),
    ({"microbatches": 2.5}, TypeError, "microbatches must be an integer, not float 2.5"),
    ({"microbatches": 0}, ValueError, "microbatches 0 is too small: must be >= 1"),
    ({"samples_per_replica": "16"}, TypeError, "samples_per_replica must be a number"),
    ({"samples_per_replica": -1}, ValueError, "samples_per_replica -1 is too small: must be > 0"),
    ({"samples_per_replica": float("inf")}, ValueError, "samples_per_replica inf must be a finite number"),
    ({"granularity": 0}, ValueError, "granularity 0 is too small"),
    ({"stream_steps": True}, TypeError, "stream_steps must be an integer, not bool True"),
])
def test_estimate_parameters(kw, exc, match):
    with pytest.raises(exc, match=match):
        estimate("resnet-152", "mesh", **kw)


@pytest.mark.parametrize("nbytes, exc, match", [
    ("1GiB", TypeError, "nbytes must be a number, not str '1GiB'"),
    (None, TypeError, "nbytes must be a number, not NoneType"),
    (0, ValueError, "nbytes 0 is too small: must be > 0"),
    (float("nan"), ValueError, "nbytes nan must be a finite number"),
])
def test_collective_size(nbytes, exc, match):
    with pytest.raises(exc, match=match):
        collective_time("mesh", "all-reduce", None, nbytes)


def test_parsers_and_network_types():
    with pytest.raises(TypeError, match="port set must be a string like '0-3,6', not int 5"):
        parse_ports(5)
    with pytest.raises(ValueError, match="names port 0 twice"):
        parse_flow("0,0>1")
    with pytest.raises(TypeError, match=r"npus_count\[0\] must be an integer, not float 8.5"):
        NetworkSpec(["Ring"], [8.5], [100.0], [500.0])
    with pytest.raises(ValueError, match=r"bandwidth\[0\] 0 is too small: must be > 0"):
        NetworkSpec(["Ring"], [8], [0], [500.0])


# ---- every parameter of the API entry points given nasty values (tests/contract/api_fuzz.py) --------------
@pytest.mark.parametrize("target", ["RCell", "DCell", "RDCell", "build_cell", "Fabric", "Crossbar", "Switch",
                                    "NetworkSpec", "collective_time"])
def test_api_bad_parameters(target):
    """None, bools, negatives, NaN, inf, 2**70, text, containers, numpy scalars and arrays for each
    parameter: the call works (a finite result) or raises TypeError / ValueError naming it."""
    import api_fuzz

    n, bad = api_fuzz.run_all(only=[target])
    assert n >= 40 and not bad, "\n".join(bad)


@pytest.mark.regress
def test_api_bad_parameters_estimate():
    import api_fuzz

    n, bad = api_fuzz.run_all(only=["estimate"])
    assert n > 100 and not bad, "\n".join(bad)


def test_api_fuzz_judge():
    """The probe fails a deep error, a message not naming the parameter and a non-finite result."""
    import api_fuzz

    def deep(x=1):
        return [][x]

    def unnamed(x=1):
        raise ValueError("something is wrong")

    class R:
        def __init__(self, x):
            self.t = float("nan")

    assert "IndexError" in api_fuzz.probe("deep", deep, {"x": 1}, "x", 5)
    assert "does not name" in api_fuzz.probe("unnamed", unnamed, {"x": 1}, "x", 5)
    assert "non-finite" in api_fuzz.probe("R", R, {"x": 1}, "x", 5)
    assert api_fuzz.probe("R", lambda x: x, {"x": 1}, "x", 5) == ""
