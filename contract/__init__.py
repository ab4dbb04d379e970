"""What the RTL, its benches and the system model share, in plain Python (no Amaranth, no
simulator, no model): the packet format (:mod:`fred.contract.packet`), the timing file
(:mod:`fred.contract.timing`, with the embedded default ``data/timing-default.json``), the
parameter checks every layer uses (:mod:`fred.contract.checks`) and the output-file rules
(:mod:`fred.contract.outputs`: checked before any work, written atomically).

Layer rule (tests/test_layers.py): ``fred.hdl``, ``fred.sim`` and ``fred.model`` may import
this package; it imports none of them.
"""
