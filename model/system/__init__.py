"""The wafer's physical constants and configurations, each defined once with its source, and the
switch figures read from a timing file (latency, activation, phase switch, preemption, link
faults, packet overheads).
"""
