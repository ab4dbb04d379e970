"""Link faults and their recovery: the fault injector on a wire, the Go-Back-N endpoints (NPU
side) and the fault bench that runs a switch between them.
"""
