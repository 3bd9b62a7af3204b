//===- OutputDirectory.cpp - the main job's output directory --------------===//
#include "OutputDirectory.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <fcntl.h>

using namespace mlir;
using namespace pipe::driver;

OutputDirectory::OutputDirectory(std::string path) : path(std::move(path)) {
  while (this->path.size() > 1 && llvm::sys::path::is_separator(this->path.back()))
    this->path.pop_back();
}

OutputDirectory::~OutputDirectory() {
  if (!staging.empty())
    llvm::sys::fs::remove_directories(staging);
}

std::string OutputDirectory::pathOf(llvm::StringRef name) const {
  llvm::SmallString<256> p(path);
  llvm::sys::path::append(p, name);
  return p.str().str();
}

LogicalResult OutputDirectory::prepare(ModuleOp module) {
  llvm::sys::fs::file_status status;
  bool exists = !llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status);
  if (exists && !llvm::sys::fs::is_directory(status))
    return module.emitError("-o '") << path
                                    << "' is a file; the main job writes a directory of outputs "
                                       "(plan.json, report.txt, pipeline.mlir, stageK.mlir, ...)";
  if (!exists && llvm::sys::path::extension(path) == ".mlir")
    return module.emitError("-o '")
           << path
           << "': the main job writes a directory of outputs (plan.json, "
              "pipeline.mlir, stageK.mlir, ...), not one .mlir file; name a "
              "directory, or run the passes with --pass-pipeline to get one module";
  if (exists) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec;
         it.increment(ec)) {
      llvm::StringRef name = llvm::sys::path::filename(it->path());
      if (!isOutputName(name))
        return module.emitError("-o '")
               << path << "' holds '" << name
               << "', which the main job did not write; the directory is replaced as a "
                  "whole, so give a new or empty one";
    }
    if (ec)
      return module.emitError("cannot read '") << path << "': " << ec.message();
  }
  llvm::SmallString<256> parent(llvm::sys::path::parent_path(path));
  if (!parent.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(parent))
      return module.emitError("cannot create '") << parent << "': " << ec.message();
  // createUniqueDirectory puts a relative name under the system's temporary
  // directory: name the staging directory beside the output, absolutely.
  llvm::SmallString<256> created, beside(path + ".tmp");
  llvm::sys::fs::make_absolute(beside);
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(beside, created))
    return module.emitError("cannot create a directory beside '")
           << path << "': " << ec.message();
  staging = created.str().str();
  return success();
}

LogicalResult OutputDirectory::write(ModuleOp module, llvm::StringRef name,
                                     llvm::StringRef text) {
  llvm::SmallString<256> p(staging);
  llvm::sys::path::append(p, name);
  if (llvm::Error error = llvm::writeToOutput(p, [&](llvm::raw_ostream &os) {
        os << text;
        return llvm::Error::success();
      }))
    return module.emitError("cannot write '") << p << "': " << llvm::toString(std::move(error));
  return success();
}

LogicalResult OutputDirectory::commit(ModuleOp module) {
  llvm::sys::fs::file_status status;
  bool exists = !llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status);
  if (!exists) {
    if (std::error_code ec = llvm::sys::fs::rename(staging, path))
      return module.emitError("cannot rename '")
             << staging << "' to '" << path << "': " << ec.message();
    staging.clear();
    return success();
  }
#ifdef RENAME_EXCHANGE
  if (renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
    // `staging` now names the old outputs; the destructor removes them.
    return success();
  }
#endif
  llvm::SmallString<256> aside, beside(path + ".old");
  llvm::sys::fs::make_absolute(beside);
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(beside, aside))
    return module.emitError("cannot create a directory beside '")
           << path << "': " << ec.message();
  llvm::sys::fs::remove(aside);
  if (std::error_code ec = llvm::sys::fs::rename(path, aside))
    return module.emitError("cannot move the old '") << path << "' aside: " << ec.message();
  if (std::error_code ec = llvm::sys::fs::rename(staging, path)) {
    llvm::sys::fs::rename(aside, path);
    return module.emitError("cannot rename '")
           << staging << "' to '" << path << "': " << ec.message();
  }
  staging = aside.str().str();
  return success();
}

bool OutputDirectory::isOutputName(llvm::StringRef name) {
  if (llvm::is_contained({"plan.json", "problem.json", "report.txt", "schedule.trace.json",
                          "schedule.svg", "pipeline.mlir", "program.json",
                          "measured.trace.json", "measured.json"},
                         name))
    return true;
  auto numbered = [&](llvm::StringRef prefix, llvm::StringRef suffix) {
    llvm::StringRef rest = name;
    unsigned index;
    return rest.consume_front(prefix) && rest.consume_back(suffix) &&
           !rest.getAsInteger(10, index);
  };
  return numbered("stage", ".mlir") || numbered("rank", ".cpp") || numbered("rank", ".so") ||
         numbered("rank", ".build.log");
}
