"""The microswitch cells: R (2 in x m out, optional reduction), D (m in x 2 out, optional
broadcast) and RD (2x2, both), and the port muxes/demuxes of odd fabrics. Each is one Amaranth
``wiring.Component`` with stream ports and a documented latency contract.
"""
