"""cocotb test benches (drivers, monitors, pause generators, checkers) that drive the emitted
Verilog under Verilator against the golden models, with their functional cover points.
"""
