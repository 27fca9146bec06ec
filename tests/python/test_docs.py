"""The README's commands work as written (issue 13): its C link line builds a program that runs without
LD_LIBRARY_PATH, and its Python snippet runs with the command it gives. User-facing docs, headers and
messages point at nothing outside the repository."""
import os
import re
import shutil
import subprocess

import pytest

from sdla_testkit.engine import ROOT

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()


def section(title):
    """The README text under `## title`, up to the next heading of that level."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def code_blocks(text, language):
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.skipif(os.path.abspath(BUILD) != os.path.join(ROOT, "build"), reason="the README's line names build/")
def test_readme_c_link_line_runs_without_library_path(tmp_path):
    (line,) = [cmd for block in code_blocks(section("Using the C API"), "bash") for cmd in block.splitlines()
               if cmd.startswith("cc ")]
    assert "-Wl,-rpath" in line
    program = tmp_path / "my_app"
    command = line.replace("my_app.c", "examples/c/hybrid_mode.c").replace("-o my_app", f"-o {program}")
    subprocess.run(["bash", "-c", command], cwd=ROOT, check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    r = subprocess.run([str(program), os.path.join(ROOT, "examples", "models", "bars.loadable")], cwd=tmp_path,
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "image 0: horizontal" in r.stdout and "cuDLAHybridMode DONE" in r.stdout


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".venv", "bin", "python")), reason="no .venv (scripts/setup.sh)")
def test_readme_python_snippet_runs_as_the_readme_says(tmp_path):
    text = section("Python")
    (run_line,) = [cmd for block in code_blocks(text, "bash") for cmd in block.splitlines() if "example.py" in cmd]
    (snippet,) = code_blocks(text, "python")
    (tmp_path / "example.py").write_text(snippet)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(["bash", "-c", run_line.replace("example.py", str(tmp_path / "example.py"))], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "7"  # the snippet's comment


OUTSIDE = re.compile(r"dla-facts|\.\./shared|cudla-api\.md|nvdla-notes")


def test_nothing_user_facing_points_outside_the_repository():
    """Docs, headers, the Python package, examples and scripts, and every string literal of the C++ sources
    (error messages), name only files that ship with softdla."""
    found = []
    for top in ("README.md", "docs", "include", "python", "examples", "scripts"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)) if os.path.isdir(os.path.join(ROOT, top)) else \
                [(ROOT, None, [top])]:
            for f in files:
                if f.endswith((".md", ".h", ".py", ".c", ".cpp", ".sh", ".txt")):
                    path = os.path.join(dirpath, f)
                    for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                        if OUTSIDE.search(line):
                            found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    for dirpath, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if f.endswith((".h", ".cpp", ".cu", ".cuh")):
                path = os.path.join(dirpath, f)
                for literal in re.findall(r'"(?:[^"\\\n]|\\.)*"', open(path, encoding="utf-8").read()):
                    if OUTSIDE.search(literal):
                        found.append(f"{os.path.relpath(path, ROOT)}: {literal}")
    assert not found, "\n".join(found)
