"""The FRED_m(P) fabric in RTL: the recursive Clos network of cells (flat, shared or hierarchical
Verilog forms) and the configuration image a routed phase loads into it.
"""
