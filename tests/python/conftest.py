import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
# The softdla package from the source tree (its extension is built next to it by CMake).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
# Expected rejections would flood the output; tests read the error strings instead.
os.environ.setdefault("SOFTDLA_LOG", "none")

from sdla_testkit import engine  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _engine_library():
    try:
        engine.lib()
    except OSError as e:
        pytest.exit(f"engine library not built ({e}); run: cmake --preset release && cmake --build --preset release")
