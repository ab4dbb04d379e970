"""Collectives on a network: endpoint algorithms (rings, 2D hierarchical, multi-ring), FRED's
in-switch phases, multi-dimensional and chunked forms, closed-form bounds, the MP/DP/PP groups
of a strategy, and running a set of collectives through the simulator.
"""
