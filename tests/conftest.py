import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
