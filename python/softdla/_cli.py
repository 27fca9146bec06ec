"""The `softdla` command of an installed wheel: runs the compiled program (softdla-cli) that sits in this
package next to libcudla.so.1 and the CUDA plugin, where it finds them. SOFTDLA_PYTHON is set to this
interpreter, so `softdla compare` runs its Python half in the same environment."""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "softdla-cli")
    if not os.access(exe, os.X_OK):
        sys.exit(f"softdla: {exe} is missing: this softdla package was installed without its command")
    os.environ.setdefault("SOFTDLA_PYTHON", sys.executable)
    os.execv(exe, ["softdla", *sys.argv[1:]])


if __name__ == "__main__":
    main()
