"""The flow-level network simulator: topologies (mesh, Fred-A..D, YAML networks), the route graph,
the task graph of flows and compute, the event engine and its max-min rate solver, and what a
simulation returns.
"""
