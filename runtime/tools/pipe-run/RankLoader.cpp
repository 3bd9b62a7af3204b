//===- RankLoader.cpp - compiling and loading OUT/rankK.cpp ----------------===//
//
// `c++ -O2 -std=c++17 -shared -fPIC -I<runtime include>` per rank ($PIPE_RUN_CXX
// names another compiler), into a temporary file renamed into place, so that a
// failed or concurrent build never leaves a half-written rankK.so.
//
//===----------------------------------------------------------------------===//
#include "RankLoader.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

namespace fs = std::filesystem;

namespace piperun {

namespace {

[[noreturn]] void rankError(int rank, const std::string &text) {
  throw std::runtime_error("rank " + std::to_string(rank) + ": " + text);
}

std::string sourceOf(const std::string &dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".cpp";
}
std::string objectOf(const std::string &dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".so";
}
std::string logOf(const std::string &dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".build.log";
}

bool needsBuild(const std::string &source, const std::string &object, const std::string &header) {
  std::error_code error;
  if (!fs::exists(object, error))
    return true;
  auto built = fs::last_write_time(object, error);
  return built < fs::last_write_time(source, error) || built < fs::last_write_time(header, error);
}

/// The first line of the compiler's log that says "error", for the one-line message.
std::string firstError(const std::string &log) {
  std::ifstream in(log);
  std::string line, first;
  while (std::getline(in, line)) {
    if (first.empty() && !line.empty())
      first = line;
    if (line.find("error") != std::string::npos)
      return line;
  }
  return first;
}

pid_t startCompiler(const std::string &source, const std::string &temporary, const std::string &log,
                    const std::string &include) {
  const char *compiler = std::getenv("PIPE_RUN_CXX");
  std::vector<std::string> args = {compiler && *compiler ? compiler : "c++",
                                   "-O2",
                                   "-std=c++17",
                                   "-shared",
                                   "-fPIC",
                                   "-I" + include,
                                   "-o",
                                   temporary,
                                   source};
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char *> argv;
    for (std::string &arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

} // namespace

std::string runtimeIncludeDir() {
#ifdef PIPE_RUNTIME_INCLUDE_DIR
  if (fs::exists(fs::path(PIPE_RUNTIME_INCLUDE_DIR) / "pipe_runtime.h"))
    return PIPE_RUNTIME_INCLUDE_DIR;
#endif
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  fs::path installed = self.parent_path().parent_path() / "include";
  if (!error && fs::exists(installed / "pipe_runtime.h"))
    return installed.string();
  throw std::runtime_error("cannot find pipe_runtime.h (looked in the build tree and in " +
                           installed.string() + ")");
}

void buildRanks(const std::string &dir, const std::vector<int> &ranks, int jobs) {
  const std::string include = runtimeIncludeDir();
  const std::string header = include + "/pipe_runtime.h";
  struct Job {
    int rank;
    std::string temporary;
  };
  std::map<pid_t, Job> running;
  std::string failure;

  auto finishOne = [&] {
    int status = 0;
    pid_t pid = wait(&status);
    if (pid <= 0)
      return;
    Job job = running.at(pid);
    running.erase(pid);
    const std::string object = objectOf(dir, job.rank), log = logOf(dir, job.rank);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      std::error_code error;
      fs::rename(job.temporary, object, error);
      if (error && failure.empty())
        failure = "rank " + std::to_string(job.rank) + ": cannot write " + object + ": " +
                  error.message();
      fs::remove(log, error);
      return;
    }
    std::error_code ignored;
    fs::remove(job.temporary, ignored);
    if (failure.empty())
      failure = "rank " + std::to_string(job.rank) + ": compiling " + sourceOf(dir, job.rank) +
                " failed: " + firstError(log) + " (full log: " + log + ")";
  };

  for (int rank : ranks)
    if (!fs::exists(sourceOf(dir, rank)))
      rankError(rank, sourceOf(dir, rank) + ": no such file (program.json names this rank)");
  for (int rank : ranks) {
    const std::string source = sourceOf(dir, rank), object = objectOf(dir, rank);
    if (!needsBuild(source, object, header)) {
      std::printf("pipe-run: rank %d: %s is up to date\n", rank, object.c_str());
      continue;
    }
    while (static_cast<int>(running.size()) >= jobs)
      finishOne();
    if (!failure.empty())
      break;
    std::printf("pipe-run: rank %d: compiling %s\n", rank, source.c_str());
    std::fflush(stdout);
    std::string temporary = object + ".tmp" + std::to_string(getpid());
    pid_t pid = startCompiler(source, temporary, logOf(dir, rank), include);
    if (pid < 0)
      rankError(rank, "cannot start the compiler: " + std::string(std::strerror(errno)));
    running[pid] = Job{rank, temporary};
  }
  while (!running.empty())
    finishOne();
  if (!failure.empty())
    throw std::runtime_error(failure);
}

RankProgram loadRank(const std::string &dir, int rank) {
  const std::string object = objectOf(dir, rank);
  void *handle = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    rankError(rank, std::string("cannot load ") + dlerror());
  auto symbol = [&](const char *name) {
    void *address = dlsym(handle, name);
    if (!address)
      rankError(rank, object + " does not define " + name + " (not a rank program)");
    return address;
  };
  auto abiVersion =
      reinterpret_cast<pipe_program_abi_version_fn>(symbol("pipe_program_abi_version"));
  auto programRank = reinterpret_cast<pipe_program_rank_fn>(symbol("pipe_program_rank"));
  RankProgram program;
  program.setup = reinterpret_cast<pipe_program_setup_fn>(symbol("pipe_program_setup"));
  program.step = reinterpret_cast<pipe_program_step_fn>(symbol("pipe_program_step"));
  if (abiVersion() != PIPE_ABI_VERSION)
    rankError(rank, object + " was built for runtime ABI version " + std::to_string(abiVersion()) +
                        ", this runtime is version " + std::to_string(PIPE_ABI_VERSION) +
                        " (regenerate it with pipe-opt)");
  if (programRank() != rank)
    rankError(rank, object + " was generated for rank " + std::to_string(programRank()));
  return program;
}

} // namespace piperun
