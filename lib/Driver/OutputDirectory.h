//===- OutputDirectory.h - the main job's output directory ------*- C++ -*-===//
//
// The output directory is replaced as a whole: files go to a directory beside
// it, which takes its place on commit(). A run that fails before commit()
// leaves the old outputs; nothing is ever half-written.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_LIB_DRIVER_OUTPUTDIRECTORY_H
#define PIPE_LIB_DRIVER_OUTPUTDIRECTORY_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace pipe::driver {

/// Refuses a path that is a file, and a directory holding anything the main
/// job does not write (it would be deleted with the old outputs).
class OutputDirectory {
public:
  explicit OutputDirectory(std::string path);
  ~OutputDirectory();

  const std::string &getPath() const { return path; }
  /// The final path of `name` inside the directory.
  std::string pathOf(llvm::StringRef name) const;

  /// Checks the path and creates the staging directory beside it.
  mlir::LogicalResult prepare(mlir::ModuleOp module);
  /// Writes `name` into the staging directory (itself through a temporary
  /// file renamed into place).
  mlir::LogicalResult write(mlir::ModuleOp module, llvm::StringRef name, llvm::StringRef text);
  /// Puts the staged directory in place of the old one (swapped in one step
  /// where the system can, else renamed aside first), then removes the old.
  mlir::LogicalResult commit(mlir::ModuleOp module);

private:
  /// What the main job writes, and what pipe-run adds to it (the compiled
  /// rank programs, their build logs, the measurements).
  static bool isOutputName(llvm::StringRef name);

  std::string path;
  std::string staging;
};

} // namespace pipe::driver

#endif // PIPE_LIB_DRIVER_OUTPUTDIRECTORY_H
