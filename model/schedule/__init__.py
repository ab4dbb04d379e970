"""The training iteration as a task graph: layer placement per strategy, weight-stationary and
weight-streaming schedules, offload and recomputation policies, and the analysis of a
simulated iteration into busy and exposed time per kind.
"""
