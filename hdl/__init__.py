"""FRED RTL in Amaranth, and the routing compiler that configures it."""
