"""CPU-only test setup: Triton's interpreter, and this checkout's kgit first."""
import os
import sys

# must be set before triton decorates any kernel
os.environ["TRITON_INTERPRET"] = "1"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
