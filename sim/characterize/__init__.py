"""Measurements of the RTL in simulation (fabric and switch latency, activation, phase switch,
preemption, link-fault goodput, overlap, clock and area at width) and the timing file writer
that turns them into the versioned file the model reads.
"""
