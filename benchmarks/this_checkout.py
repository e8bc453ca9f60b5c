"""Imported first by every benchmark: measure the checkout the benchmark is in, not the lab
installed in the environment, in this process and in Spark's Python workers (which import the
lab's modules by name: they find this checkout through ``PYTHONPATH``, which they inherit)."""

import os
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(path for path in (ROOT, os.environ.get("PYTHONPATH")) if path)
