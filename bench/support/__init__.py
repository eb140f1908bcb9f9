"""Test and bench support that must not ship in the wheel: the read cache's ground truth and
simulated hosts (oracle.py), the replay engine for traces (replay.py), a throw-away redis-server
(localredis.py). The installed package never imports any of it (tests/test_layout.py checks)."""
