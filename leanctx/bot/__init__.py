"""leanctx for bots built on a Python agent SDK, in-process (no host settings files, no hook spawns)."""
