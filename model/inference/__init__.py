"""LLM inference on the wafer (``fred infer``): prefill and decode of a decoder transformer,
mesh vs Fred-A..D.

* :mod:`.costs` -- what one NPU computes, reads and holds per block and step (weights, key/value
  cache, roofline), and the HBM check;
* :mod:`.serve` -- the steps as task graphs in the flow simulator, the figures (time to first
  token, time per output token, tokens per second, exposed communication per kind);
* :mod:`.plot` -- the per-fabric breakdown plot.
"""

from .costs import Shape, check_memory, memory_per_npu, shape_of
from .serve import COMM_KINDS, Inference, default_strategy, infer, infer_table

__all__ = ["Shape", "check_memory", "memory_per_npu", "shape_of", "COMM_KINDS", "Inference", "default_strategy",
           "infer", "infer_table"]
