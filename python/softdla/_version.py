"""softdla.__version__, from pyproject.toml, the one place the version is written (CMake reads it there
too, for `softdla --version`: cmake/version.cmake).

Installed (pip, a wheel), the package's metadata holds it. In a source tree (PYTHONPATH=python), where an
installed softdla may also exist with another version, pyproject.toml next to python/ is read first."""
import os
import re

_PYPROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pyproject.toml")


def _from_pyproject(path):
    """The [project] table's version, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not table or not re.search(r'^name\s*=\s*"softdla"', table.group(1), re.M):
        return None  # some other project's pyproject.toml above an installed package
    version = re.search(r'^version\s*=\s*"([^"]+)"', table.group(1), re.M)
    return version.group(1) if version else None


def _version():
    found = _from_pyproject(_PYPROJECT)
    if found:
        return found
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("softdla")
    except PackageNotFoundError:
        return "0+unknown"  # neither installed nor in its source tree: a copied directory


__version__ = _version()
