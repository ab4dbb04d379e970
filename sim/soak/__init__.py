"""The compiled path: the golden models' stimulus replayed by a C++ Verilator harness and checked
by Python in batches, for long random soaks at hundreds of thousands of cycles per second.
"""
