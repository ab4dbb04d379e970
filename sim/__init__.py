"""Golden models (plain Python + numpy) and cocotb + Verilator testbenches."""
