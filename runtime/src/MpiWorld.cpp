//===- MpiWorld.cpp - the MPI world of a run -------------------------------===//
//
// Initialisation, the timed barrier (MPI_Ibarrier polled against a deadline),
// gathering each rank's results on rank 0 and MPI_Abort. Without MPI at build
// time, constructing a world says so.
//
//===----------------------------------------------------------------------===//
#include "Mpi.h"

#include <cstdlib>
#include <stdexcept>

#ifdef PIPE_RUNTIME_HAS_MPI
#include <mpi.h>

#include <chrono>
#include <thread>
#endif

namespace piperun {

bool MpiWorld::launched() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(name))
      return true;
  return false;
}

#ifdef PIPE_RUNTIME_HAS_MPI

std::unique_ptr<Transport> makeMpiTransport(); // MpiTransport.cpp

bool MpiWorld::built() { return true; }

MpiWorld::MpiWorld(int *argc, char ***argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &localSize_);
  MPI_Comm_free(&local);
}

MpiWorld::~MpiWorld() { MPI_Finalize(); }

bool MpiWorld::barrier(double timeoutSeconds) {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done)
      return true;
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::vector<std::vector<char>> MpiWorld::gatherToRoot(const std::vector<char> &mine) {
  long long size = static_cast<long long>(mine.size());
  std::vector<long long> sizes(static_cast<size_t>(size_));
  MPI_Gather(&size, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  constexpr int kTag = 7;
  std::vector<std::vector<char>> all;
  if (rank_ != 0) {
    MPI_Send(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, 0, kTag, MPI_COMM_WORLD);
    return all;
  }
  all.push_back(mine);
  for (int k = 1; k < size_; ++k) {
    std::vector<char> bytes(static_cast<size_t>(sizes[static_cast<size_t>(k)]));
    MPI_Recv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, k, kTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    all.push_back(std::move(bytes));
  }
  return all;
}

void MpiWorld::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::unique_ptr<Transport> MpiWorld::transport() { return makeMpiTransport(); }

#else

bool MpiWorld::built() { return false; }

MpiWorld::MpiWorld(int *, char ***) {
  throw std::runtime_error("this pipe-run was built without MPI (install libopenmpi-dev and "
                           "rebuild, or use --transport threads)");
}
MpiWorld::~MpiWorld() = default;
bool MpiWorld::barrier(double) { return true; }
std::vector<std::vector<char>> MpiWorld::gatherToRoot(const std::vector<char> &mine) {
  return {mine};
}
void MpiWorld::abort(int code) { std::_Exit(code); }
std::unique_ptr<Transport> MpiWorld::transport() { return nullptr; }

#endif

} // namespace piperun
