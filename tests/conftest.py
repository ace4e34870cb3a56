import os
import sys

from hypothesis import settings

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))

# The same examples on every run: CI must not fail on a draw a local run never saw.
settings.register_profile("bytegrad", derandomize=True, deadline=None)
settings.load_profile("bytegrad")
