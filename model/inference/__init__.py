"""LLM inference on the wafer (``fred infer``): prefill and decode of a decoder transformer,
mesh vs Fred-A..D.

* :mod:`.costs` -- what one NPU computes, reads and holds per block and step (weights, key/value
  cache, roofline), and the HBM check;
* :mod:`.serve` -- the steps as task graphs in the flow simulator, the figures (time to first
  token, time per output token, tokens per second, exposed communication per kind);
* :mod:`.plot` -- the per-fabric breakdown plot.

Nothing is imported here: ``fred infer``'s options read the limits of :mod:`.costs` without
loading the simulator.
"""
