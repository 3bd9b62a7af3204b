//===- TestSupport.cpp - helpers shared by the runtime's tests -------------===//
#include "TestSupport.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

namespace fs = std::filesystem;

namespace piperun::test {

std::string scratchDir() {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  // One directory per test, emptied when the test starts again (ctest runs each
  // test alone, so no two processes share one).
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  std::replace(name.begin(), name.end(), '/', '_');
  fs::path dir = fs::path(PIPE_RUNTIME_TEST_WORK) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

CommandResult runCommand(const std::vector<std::string> &argv, double limitSeconds,
                         const std::vector<std::string> &environment) {
  char outPath[] = "/tmp/piperun-test-out-XXXXXX", errPath[] = "/tmp/piperun-test-err-XXXXXX";
  int outFd = mkstemp(outPath), errFd = mkstemp(errPath);
  // Everything the child needs is built before fork (no allocation after it).
  std::vector<char *> args, env;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);
  for (const std::string &entry : environment) // first: getenv takes the first match
    env.push_back(const_cast<char *>(entry.c_str()));
  for (char **entry = environ; *entry; ++entry)
    env.push_back(*entry);
  env.push_back(nullptr);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0); // its own group, so the time limit kills mpirun's children too
    dup2(outFd, 1);
    dup2(errFd, 2);
    execvpe(args[0], args.data(), env.data());
    _exit(127);
  }
  CommandResult result;
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(limitSeconds)) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.exitCode = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(outFd);
  close(errFd);
  result.out = readFile(outPath);
  result.err = readFile(errPath);
  unlink(outPath);
  unlink(errPath);
  return result;
}

std::vector<float> valuesOf(const pipe_tensor *t) {
  const auto *data = static_cast<const float *>(t->data);
  return std::vector<float>(data, data + t->numel);
}

void setValues(pipe_tensor *t, const std::vector<float> &values) {
  std::memcpy(t->data, values.data(), values.size() * sizeof(float));
}

} // namespace piperun::test
