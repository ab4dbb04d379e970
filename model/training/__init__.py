"""Answers: the per-workload training estimate on each fabric, the strategy sweep, the NPU-speed
scan with its crossovers, and estimates from ASTRA-sim and Chakra traces.
"""
