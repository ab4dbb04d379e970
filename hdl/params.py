"""The shared parameters of the hdl blocks -- ports, middle, lanes -- checked in one place.

Every block (cells, demux/mux, fabric, switch, crossbar, adders), the flattened structure and the
routing compiler check these here, with the one wording of :mod:`fred.contract.checks`:

* ``TypeError`` for a wrong type: ``lanes must be an integer, not str '4'``;
* ``ValueError`` for a wrong value: ``middle 1 is too small: must be >= 2``,
  ``ports 65 is too large: must be <= 64 (RTL generation of a larger FRED_m(P) takes too long)``.

Each block passes its own upper bound for ``ports`` (and says where it comes from); the lower
bounds are FRED's: a fabric or a switch has at least 2 ports and 2 middle subnetworks
(FRED_m(P) with m = 1 is a chain of single paths, not a network), a beat at least 1 lane.
"""

from __future__ import annotations

from contextlib import contextmanager

from fred.contract.checks import check_int

__all__ = ["MAX_LANES", "MAX_MIDDLE", "check_ports", "check_middle", "check_lanes", "rejecting"]

#: widest beat generated: each lane is a full element adder per reducing cell, so a wider beat
#: makes even a single cell take minutes to elaborate and convert.
MAX_LANES = 1024
_LANES_WHY = "a wider beat is not generated in reasonable time"
#: most middle subnetworks (m = 3 routes every 3D-parallel phase; a cell with m outputs has m
#: output streams, and m = 2**70 would never finish elaborating)
MAX_MIDDLE = 64
_MIDDLE_WHY = "more middle subnetworks are never needed and not generated in reasonable time"


def check_ports(ports, high: int | None = None, why: str | None = None) -> int:
    """Port count P: an integer >= 2 (and <= ``high``, for the reason ``why``)."""
    check_int("ports", ports, 2)
    return check_int("ports", ports, None, high, why)


def check_middle(middle) -> int:
    """Middle subnetworks m of FRED_m(P) (the outputs of an R cell, the inputs of a D cell,
    demux and mux): an integer, 2 .. :data:`MAX_MIDDLE`."""
    check_int("middle", middle, 2)
    return check_int("middle", middle, None, MAX_MIDDLE, _MIDDLE_WHY)


def check_lanes(lanes) -> int:
    """Elements per beat: an integer, 1 .. :data:`MAX_LANES`."""
    check_int("lanes", lanes, 1)
    return check_int("lanes", lanes, None, MAX_LANES, _LANES_WHY)


@contextmanager
def rejecting(component):
    """Wrap the checks in a component's constructor: when one raises, the half-built component
    is marked used, so Amaranth's UnusedElaboratable warning does not follow the one-line error."""
    try:
        yield
    except Exception:
        component._MustUse__silence = True
        raise
