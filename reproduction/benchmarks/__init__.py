"""Side-by-side speed and memory benchmarks (``make bench``); see ``benchmarks/run.py``."""
