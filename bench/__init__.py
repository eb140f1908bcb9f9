"""Benchmarks (run as scripts: `python bench/NAME.py`); a package only so tests can import bench/support."""
