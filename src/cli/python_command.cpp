// The subcommands written in Python: compare (it needs ONNX Runtime, which only Python has here), report
// and estimate. Each runs its module's main() in place of this process. It works from a build tree
// (the source tree's python/ goes on PYTHONPATH) and from an installed wheel (the package is already
// importable by the interpreter installed next to this binary).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "commands.h"

namespace softdla::cli {
namespace {
namespace fs = std::filesystem;

// Imports the module before anything else so a missing package or dependency says what to install,
// not a traceback. argv[1..3]: the command's name, its module, and what it needs besides softdla.
constexpr const char* kBootstrap =
    "import importlib, sys\n"
    "name, module, needs = sys.argv[1:4]\n"
    "try:\n"
    "    main = importlib.import_module(module).main\n"
    "except ImportError as e:\n"
    "    if (e.name or 'softdla').split('.')[0] == 'softdla':\n"
    "        sys.exit(f'softdla {name}: {sys.executable} cannot import the softdla package ({e}); '\n"
    "                 'pip install softdla there, or set SOFTDLA_PYTHON to a Python that has it')\n"
    "    sys.exit(f'softdla {name}: {sys.executable} has no {e.name}; softdla {name} needs {needs}: '\n"
    "             f'pip install them there, or set SOFTDLA_PYTHON to a Python that has them')\n"
    "sys.exit(main(sys.argv[4:]))\n";

fs::path own_directory() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// The source tree when this binary sits in a CMake build directory (its CMakeCache.txt names it), so
// `build/softdla compare` uses the sources it was built from; empty for an installed binary.
fs::path source_tree(const fs::path& dir) {
  std::ifstream cache(dir / "CMakeCache.txt");
  const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
  for (std::string line; std::getline(cache, line);)
    if (line.rfind(key, 0) == 0) {
      const fs::path src = line.substr(key.size());
      if (fs::exists(src / "python" / "softdla" / "__init__.py")) return src;
    }
  return {};
}

// $SOFTDLA_PYTHON; else the python3 next to this binary (a wheel installed into a virtual environment
// puts both in its bin/); else, in a build tree with no virtual environment active, the tree's .venv
// (scripts/setup.sh); else python3 from PATH.
std::string interpreter(const fs::path& dir, const fs::path& src) {
  if (const char* p = std::getenv("SOFTDLA_PYTHON"); p && *p) return p;
  if (!dir.empty() && fs::exists(dir / "python3")) return (dir / "python3").string();
  if (!src.empty() && !std::getenv("VIRTUAL_ENV") && fs::exists(src / ".venv" / "bin" / "python3"))
    return (src / ".venv" / "bin" / "python3").string();
  return "python3";
}

}  // namespace

int python_command(const PythonCommand& command, const std::vector<std::string>& args) {
  const fs::path dir = own_directory(), src = source_tree(dir);
  const std::string python = interpreter(dir, src);
  if (!src.empty()) {
    std::string path = (src / "python").string();
    if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
    setenv("PYTHONPATH", path.c_str(), 1);
  }
  std::vector<std::string> words = {python, "-c", kBootstrap, command.name, command.module, command.needs};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execvp(python.c_str(), argv.data());  // returns only on failure
  std::cerr << "softdla: error: cannot run '" << python << "' (" << std::strerror(errno) << "): softdla "
            << command.name << " needs Python 3 with " << command.needs
            << "; set SOFTDLA_PYTHON to the interpreter to use\n";
  return 1;
}

}  // namespace softdla::cli
