"""The build step of `pip install ./python` that pyproject.toml cannot say.

pipe_opt._native, the compiled planners, is built by CMake with the rest of
pipe-opt (scripts/setup.sh): this copies it from the build directory into the
package, so that the wheel holds it. The build directory is $PIPE_OPT_BUILD_DIR,
by default build/ at the root of the checkout this file is in. The module finds
libMLIR.so by the RPATH the build gave it, so the installed copy imports from
any directory. The version is the CMake project's.
"""

import os
import re
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)


def project_version() -> str:
    with open(os.path.join(REPO_ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"project\(pipe-opt\s+VERSION\s+([0-9.]+)", f.read())
    if not match:
        raise SystemExit("error: no `project(pipe-opt VERSION ...)` in "
                         f"{os.path.join(REPO_ROOT, 'CMakeLists.txt')}")
    return match.group(1)


def built_native() -> str:
    """The path of the built _native module for this Python, or a clear error."""
    build_dir = os.environ.get("PIPE_OPT_BUILD_DIR") or os.path.join(REPO_ROOT, "build")
    directory = os.path.join(os.path.abspath(build_dir), "python", "pipe_opt")
    name = "_native" + sysconfig.get_config_var("EXT_SUFFIX")
    path = os.path.join(directory, name)
    if os.path.isfile(path):
        return path
    others = sorted(f for f in os.listdir(directory) if f.startswith("_native")) \
        if os.path.isdir(directory) else []
    if others:
        reason = (f"{directory} holds {', '.join(others)}, built for another Python than "
                  f"this one ({sys.executable}, which needs {name}): configure the build "
                  f"with -DPYTHON_EXECUTABLE={sys.executable}")
    else:
        reason = (f"{path} does not exist. Run scripts/setup.sh first: it builds pipe-opt "
                  "and, when pybind11 is installed (Debian: pybind11-dev python3-pybind11), "
                  "the module; or set PIPE_OPT_BUILD_DIR to the build directory that has it")
    raise SystemExit(f"error: pipe_opt._native is not built: {reason}")


class BuildPyWithNative(build_py):
    """build_py, then the built extension into the package."""

    def run(self):
        super().run()
        source = built_native()
        target = os.path.join(self.build_lib, "pipe_opt", os.path.basename(source))
        self.copy_file(source, target)


class BinaryDistribution(Distribution):
    """The package holds a compiled module: the wheel is for this platform."""

    def has_ext_modules(self):
        return True


setup(version=project_version(), cmdclass={"build_py": BuildPyWithNative},
      distclass=BinaryDistribution)
