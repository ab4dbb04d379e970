"""The full FRED switch around the fabric: input-port buffers with virtual channels and credits,
the control unit with its per-phase configuration table, priority preemption, online routing
for the default index, and the link ends (per-flit CRC, Go-Back-N sequence alignment, poisoning).
"""
