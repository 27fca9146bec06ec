import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
# Expected rejections would flood the output; tests read the error strings instead.
os.environ.setdefault("SOFTDLA_LOG", "none")

from sdla_testkit import engine  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _engine_library():
    try:
        engine.lib()
    except OSError as e:
        pytest.exit(f"engine library not built ({e}); run: cmake --preset release && cmake --build --preset release")
