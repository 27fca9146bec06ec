"""NVIDIA's cuda.bindings.cudla (PyPI cuda-bindings >= 13.3, CPU-only machine) runs a complete inference
over softdla's libcudla.so.1, and its output bytes equal softdla's own engine's."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from sdla_testkit import formats as F
from sdla_testkit.engine import ROOT, Engine

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))


@pytest.mark.skipif(importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.bindings") is None,
                    reason="cuda-bindings not installed")
def test_nvidia_bindings_run_the_bundled_model_over_our_library():
    loadable = os.path.join(ROOT, "examples", "models", "bars.loadable")
    images = np.load(os.path.join(ROOT, "examples", "models", "bars_images.npy"))
    packed = F.pack(np.round(images * 127).astype(np.int8), F.DLA_HWC4)
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "nvidia_bindings_inference.py"),
                        os.path.join(BUILD, "libcudla.so.1"), loadable, packed.hex()],
                       capture_output=True, text=True, env={**os.environ, "SOFTDLA_LOG": "none", "SOFTDLA_BACKEND": "cpu"})  # host memory
    assert r.returncode == 0, r.stderr
    theirs = bytes.fromhex(r.stdout.strip().splitlines()[-1])
    ours = Engine(open(loadable, "rb").read()).run_raw([packed], 1)[0]
    assert theirs == ours
    probs = F.unpack(theirs, (4, 4, 1, 1), np.float16, F.CHW16).reshape(4, 4)
    assert list(probs.argmax(1)) == [0, 1, 2, 3]
