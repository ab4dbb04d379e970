"""Formal proofs with SymbiYosys and Yices: the stream rules, beat conservation and routing of
the cells and of small fabrics, and the switch input port's credit and buffer bounds.
"""
