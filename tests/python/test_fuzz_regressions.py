"""Replays the Python fuzz target's regression inputs and corpus (fuzz/regressions/fuzz_python_cudla/,
fuzz/corpus/fuzz_python_cudla/): each one once through the target, which raises on any exception the
softdla.cudla contract does not allow. The native targets replay under CTest (fuzz_replay_*)."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "fuzz")


def _inputs():
    for sub in ("regressions", "corpus"):
        d = os.path.join(FUZZ, sub, "fuzz_python_cudla")
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            yield os.path.join(sub, name), os.path.join(d, name)


def _target():
    pytest.importorskip("atheris")
    spec = importlib.util.spec_from_file_location("fuzz_python_cudla", os.path.join(FUZZ, "fuzz_python_cudla.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name,path", list(_inputs()), ids=[n for n, _ in _inputs()])
def test_replay(name, path):
    with open(path, "rb") as f:
        _target().test_one_input(f.read())
