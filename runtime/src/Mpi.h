//===- Mpi.h - one rank per process under mpirun / srun -------------*- C++ -*-===//
//
// The MPI world of a run (initialisation, a barrier, gathering results on rank
// 0, abort) and the MPI transport. Built when CMake finds MPI; otherwise
// MpiWorld's constructor throws a message saying so.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_MPI_H
#define PIPE_RUNTIME_MPI_H

#include "Transport.h"

#include <memory>
#include <vector>

namespace piperun {

class PIPE_EXPORT MpiWorld {
public:
  /// Whether libpiperun was built with MPI.
  static bool built();
  /// Whether this process was started by an MPI launcher (mpirun, srun).
  static bool launched();

  /// MPI_Init_thread (funneled); throws std::runtime_error without MPI.
  MpiWorld(int *argc, char ***argv);
  ~MpiWorld(); ///< MPI_Finalize
  MpiWorld(const MpiWorld &) = delete;
  MpiWorld &operator=(const MpiWorld &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Ranks of this world on this machine (to share its cores).
  int localSize() const { return localSize_; }

  /// False when some rank did not arrive within the timeout.
  bool barrier(double timeoutSeconds);
  /// Rank 0 gets every rank's bytes in rank order; the others get nothing.
  std::vector<std::vector<char>> gatherToRoot(const std::vector<char> &mine);
  /// MPI_Abort: every process of the world exits with `code`.
  [[noreturn]] void abort(int code);

  /// The transport over a private duplicate of the world's communicator.
  std::unique_ptr<Transport> transport();

private:
  int rank_ = 0, size_ = 1, localSize_ = 1;
};

} // namespace piperun

#endif // PIPE_RUNTIME_MPI_H
