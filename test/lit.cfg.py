# lit configuration for pipe-opt's tests.
import os
import lit.formats
from lit.llvm import llvm_config

config.name = "PIPE_OPT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.excludes = ["Inputs", "Fixtures", "fuzz", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pipe_obj_root, "test")

llvm_config.with_system_environment(["HOME", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

tool_dirs = [os.path.join(config.pipe_obj_root, "bin"), config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["pipe-opt", "pipe-plan", "pipe-run", "mlir-translate", "mlir-opt"],
                                   tool_dirs)
# An AddressSanitizer build (scripts/sanitize.sh).
if getattr(config, "pipe_asan", 0):
    config.available_features.add("asan")

# The dialect and pass plugin for upstream's mlir-opt (tools/pipe-opt-plugin).
config.substitutions.append(
    ("%pipe_plugin", os.path.join(config.pipe_obj_root, "lib", "pipe-opt-plugin.so")))
config.substitutions.append(("%fixtures", os.path.join(config.test_source_root, "Fixtures")))
config.substitutions.append(("%python", "/usr/bin/python3"))

# Debian's libonnx-testdata (ONNX's backend node tests) and python3-onnx.
onnx_node_tests = "/usr/share/libonnx-testdata/data/node"
if os.path.isdir(onnx_node_tests):
    import subprocess
    if subprocess.run(["/usr/bin/python3", "-c", "import onnx"],
                      capture_output=True).returncode == 0:
        config.available_features.add("onnx-testdata")
        config.substitutions.append(("%onnx_node_tests", onnx_node_tests))

import subprocess as _subprocess
if _subprocess.run(["/usr/bin/python3", "-c", "import onnx, numpy"],
                   capture_output=True).returncode == 0:
    config.available_features.add("python-onnx")
