"""NAME=VALUE options (`--env-a`, `--env-b`) of the A/B tools, bench/ab_builds.py and bench/gpu_ab.py."""
import sys


def parse_env(items, tool):
    """{name: value} of NAME=VALUE strings; exits with a message naming `tool` on anything else."""
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            sys.exit(f"{tool}: expected NAME=VALUE, got {item!r}")
        env[name] = value
    return env
