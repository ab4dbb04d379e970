"""The ``fred`` sub-commands, one module each (see :mod:`fred.cli` for the contract).

This is the only layer (with :mod:`fred.run`, :mod:`fred.bench` and :mod:`fred.benchmarks`)
that may import every other one: hdl, sim, model and contract.
"""
