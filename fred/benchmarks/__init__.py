"""Benchmarks of the system model (``make bench``; registered in :mod:`fred.bench`)."""
