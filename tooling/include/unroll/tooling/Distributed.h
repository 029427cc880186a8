//===- Distributed.h - the ranks of a data-parallel job ---------*- C++ -*-===//
//
// `mpirun -np N unroll-run …` (or `srun`) starts N ranks; each trains on its
// share of the global batch, the gradients meet in an all-reduce (MPI on the
// host for CPU libraries, NCCL on device buffers for GPU libraries) and every
// rank applies the same Adam step (docs/training.md, "More than one
// process"). A process that no launcher started is one rank, and every
// collective below returns at once.
//
// unroll-run does not link MPI: the ranks open libunroll_mpi.so (MpiPlugin.h)
// and libnccl.so.2 with dlopen. A collective that fails, or that waits
// longer than the timeout for another rank, ends the whole job with a
// message naming this rank: no rank waits forever for one that is stuck or
// gone.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_DISTRIBUTED_H
#define UNROLL_TOOLING_DISTRIBUTED_H

#include <cstdint>
#include <string>
#include <vector>

namespace unroll {

class Model;

/// Whether a launcher (mpirun, srun, …) started this process as one of
/// several ranks, from the variables it sets (OMPI_COMM_WORLD_SIZE,
/// PMI_SIZE, PMIX_SIZE, SLURM_NTASKS in a job step); `size` gets the count.
bool launchedAsRanks(int &size);

class Communicator {
public:
  Communicator() = default;
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;
  ~Communicator();

  /// Joins the job when a launcher started several ranks, else stays the
  /// only rank. False, with a message, when ranks were launched but MPI
  /// cannot be used: libunroll_mpi.so was not built (no MPI packages at
  /// build time) or does not load.
  bool init(std::string &error);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }
  bool distributed() const { return size_ > 1; }
  bool root() const { return rank_ == 0; }
  /// "rank 1 of 2: " in a job of several ranks, else "": the start of
  /// every message a rank prints about itself.
  std::string who() const;
  /// The MPI library, e.g. "Open MPI v4.1.4" ("" for one rank).
  const std::string &library() const { return library_; }

  /// A collective that waits longer than this ends the job (default 600 s).
  void setTimeout(double seconds) { timeout_ = seconds; }
  double timeout() const { return timeout_; }

  // Host collectives. `what` names the collective in the messages of a
  // failure or a timeout ("gradient all-reduce of step 12").

  /// In-place sum over the ranks.
  void allreduceSum(std::vector<double> &v, const std::string &what);
  /// The root's `text` / `v` on every rank (resized to the root's size).
  void broadcast(std::string &text, const std::string &what);
  void broadcast(std::vector<double> &v, const std::string &what);
  /// Every rank's `mine` (the same size on each), concatenated in rank order.
  std::vector<double> allgather(const std::vector<double> &mine, const std::string &what);
  /// The lowest rank whose `ok` is false, -1 when every rank's is true.
  int firstFailure(bool ok, const std::string &what);

  // NCCL, for GPU libraries (one GPU per rank).

  /// Opens libnccl.so.2 and forms a communicator of all ranks on the GPU
  /// library `m`'s device and stream, its unique id sent over MPI. False,
  /// with the reason, when NCCL is not compiled in or cannot be used.
  bool initNccl(const Model &m, std::string &error);
  bool ncclReady() const { return nccl_ != nullptr; }
  /// NCCL's version, e.g. "NCCL 2.28.3".
  const std::string &ncclVersion() const { return ncclVersion_; }
  /// recv = the mean over the ranks of send, `count` f32 (else f64)
  /// elements in device memory, on the library's stream; returns once done.
  void allreduceMeanDevice(const void *send, void *recv, int64_t count, bool f32,
                           const std::string &what);

  /// Time and bytes of this rank's collectives: the gradients', and the
  /// rest (status of every step, broadcasts).
  struct Traffic {
    double seconds = 0, bytes = 0;
    int64_t calls = 0;
  };
  const Traffic &gradientTraffic() const { return gradient_; }
  const Traffic &controlTraffic() const { return control_; }
  /// Counts the calls above toward the gradient's traffic (else control).
  void countAsGradient(bool on) { countGradient_ = on; }

  /// Every rank decided, in a collective, to stop with the same status.
  void agreeToStop() { agreed_ = true; }
  /// Ends this rank's part with status `rc`: when every rank ends together
  /// (rc 0, or agreeToStop()), waits for the others and finalizes MPI;
  /// otherwise MPI_Abort ends every rank of the job. Returns rc.
  int finish(int rc);

  /// Prints "unroll-run: error: <who()><message>" and ends the job.
  [[noreturn]] void fail(const std::string &message, int code = 5);

private:
  struct Plugin;
  struct Nccl;
  struct Watchdog;
  class Watch;
  void account(double seconds, double bytes);

  int rank_ = 0, size_ = 1, localRank_ = 0, localSize_ = 1;
  bool threadMultiple_ = false, agreed_ = false, finished_ = false, countGradient_ = false;
  double timeout_ = 600;
  std::string library_, ncclVersion_;
  Plugin *mpi_ = nullptr;
  Nccl *nccl_ = nullptr;
  Watchdog *watchdog_ = nullptr;
  Traffic gradient_, control_;
};

/// This process's communicator (unroll-run's main calls init()).
Communicator &world();

} // namespace unroll

#endif // UNROLL_TOOLING_DISTRIBUTED_H
