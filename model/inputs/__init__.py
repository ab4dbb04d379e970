"""Readers of workloads written elsewhere: ASTRA-sim text workloads and Chakra execution traces
(protobuf schema included).
"""
