"""The routing compiler: colours each level's conflict graph with m middle subnetworks, enables
reduction and broadcast where a flow owns both ports of a cell, and checks the result.
Also the placement study (which 3D-parallel flow sets route under which numbering).
"""
