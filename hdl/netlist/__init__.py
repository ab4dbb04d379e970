"""The fabric as data (pure Python, no Amaranth): cell modes, the recursive FRED_m(P) structure
(stages, cells, wires) and flows (sets of input ports summed and delivered to output ports).
The routing compiler, the RTL and the golden models all read this one description.
"""
