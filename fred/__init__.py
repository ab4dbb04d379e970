"""FRED: a wafer-scale reduce/distribute training fabric.

Sub-packages:

* :mod:`fred.hdl`   -- Amaranth RTL (microswitch cells, FRED_m(P) fabric, switch) and the
  routing compiler that configures it.
* :mod:`fred.sim`   -- Python golden models and cocotb + Verilator testbenches; switch
  characterization.
* :mod:`fred.model` -- the system-level wafer model (network, collectives, training schedule).
"""

__version__ = "0.1.0"


class FredError(Exception):
    """A user-facing error: bad input or impossible parameters.

    The CLI prints ``fred: error: <message>`` on one line and exits with status 2. The message
    must name the offending value.
    """
