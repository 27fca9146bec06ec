"""Generates the Python FlatBuffers module for src/loadable/loadable.fbs with flatc, once per session."""
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCHEMA = os.path.join(ROOT, "src", "loadable", "loadable.fbs")
_out = None


def fb():
    """Returns the generated package `softdla.fb` (as a module namespace)."""
    global _out
    if _out is None:
        flatc = shutil.which("flatc")
        if flatc is None:
            raise RuntimeError("flatc not found: install Debian's flatbuffers-compiler")
        _out = tempfile.mkdtemp(prefix="softdla_fb_")
        subprocess.run([flatc, "--python", "--gen-object-api", "-o", _out, SCHEMA], check=True)
        # The generated package is named softdla.fb; keep it apart from any installed softdla package.
        os.rename(os.path.join(_out, "softdla"), os.path.join(_out, "softdla_fbgen"))
        sys.path.insert(0, _out)
        for root, _, files in os.walk(os.path.join(_out, "softdla_fbgen")):
            for f in files:
                p = os.path.join(root, f)
                with open(p) as fh:
                    s = fh.read()
                s = s.replace("softdla.fb.", "softdla_fbgen.fb.").replace("from softdla.fb ", "from softdla_fbgen.fb ")
                with open(p, "w") as fh:
                    fh.write(s)
    return importlib.import_module("softdla_fbgen.fb")


def mod(name):
    fb()
    return importlib.import_module("softdla_fbgen.fb." + name)
