"""Golden models in plain Python + numpy (no simulator imports): IEEE element adds, the cells,
the fabric and the switch, bit-exact references for every bench.
"""
