//===- Distributed.cpp - the ranks of a data-parallel job -----------------===//
#include "unroll/tooling/Distributed.h"
#include "unroll/runtime/Model.h"
#include "unroll/tooling/MpiPlugin.h"

#ifdef UNROLL_HAVE_NCCL
#include <nccl.h>
#endif

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

using namespace unroll;
using Clock = std::chrono::steady_clock;

namespace {
double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

int envInt(const char *name) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : 0;
}

/// The folder of this executable (for libunroll_mpi.so beside it).
std::string exeDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return "";
  buf[n] = 0;
  std::string p = buf;
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}
/// dlopen of the first of `paths` that loads; null if none does, with the
/// loader's messages for the paths that exist (or for every path when
/// `allErrors`) in `errors`.
void *openFirst(const std::vector<std::string> &paths, int flags, bool allErrors,
                std::string &errors) {
  for (const std::string &p : paths) {
    if (void *lib = dlopen(p.c_str(), flags))
      return lib;
    const char *e = dlerror();
    if (allErrors || access(p.c_str(), F_OK) == 0)
      errors += std::string(errors.empty() ? "" : "; ") + (e ? e : p.c_str());
  }
  return nullptr;
}

/// Binds each function pointer to its symbol in `lib`: false if one is
/// missing.
struct Binder {
  void *lib;
  bool ok = true;
  template <typename F> Binder &operator()(F &fn, const char *name) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    ok = ok && fn;
    return *this;
  }
};
} // namespace

bool unroll::launchedAsRanks(int &size) {
  // Open MPI's mpirun, MPICH/Hydra and Intel MPI (PMI), PMIx launchers,
  // Slurm's srun (SLURM_STEP_ID is set inside a job step only: a batch
  // script's own shell is not a rank).
  size = 1;
  for (const char *v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"})
    if (int n = envInt(v); n > 0) {
      size = n;
      return true;
    }
  if (getenv("SLURM_STEP_ID") && envInt("SLURM_NTASKS") > 0) {
    size = envInt("SLURM_NTASKS");
    return true;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// The MPI plugin
//===----------------------------------------------------------------------===//

struct Communicator::Plugin {
  void *lib = nullptr;
  decltype(&unroll_mpi_init) init;
  decltype(&unroll_mpi_allreduce_sum_f64) allreduce;
  decltype(&unroll_mpi_bcast) bcast;
  decltype(&unroll_mpi_allgather) allgather;
  decltype(&unroll_mpi_barrier) barrier;
  decltype(&unroll_mpi_abort) abort;
  decltype(&unroll_mpi_finalize) finalize;
  decltype(&unroll_mpi_library) library;
  decltype(&unroll_mpi_error) error;

  bool open(std::string &why) {
    std::vector<std::string> paths;
    std::string dir = exeDir();
    if (const char *p = getenv("UNROLL_MPI_PLUGIN"); p && *p) {
      paths.push_back(p); // this one alone
    } else {
      if (!dir.empty()) {
        paths.push_back(dir + "/../lib/libunroll_mpi.so");
        paths.push_back(dir + "/libunroll_mpi.so");
      }
      paths.push_back("libunroll_mpi.so");
    }
    // RTLD_GLOBAL: Open MPI's own components resolve libmpi's symbols.
    std::string errors;
    lib = openFirst(paths, RTLD_NOW | RTLD_GLOBAL, paths.size() == 1, errors);
    if (!lib) {
      why = "libunroll_mpi.so cannot be loaded (" +
            (errors.empty() ? "not beside unroll-run, nor on the loader's path" : errors) + ")";
      return false;
    }
    Binder bind{lib};
    bind(init, "unroll_mpi_init")(allreduce, "unroll_mpi_allreduce_sum_f64")(bcast,
                                                                             "unroll_mpi_bcast");
    bind(allgather, "unroll_mpi_allgather")(barrier, "unroll_mpi_barrier")(abort,
                                                                           "unroll_mpi_abort");
    bind(finalize, "unroll_mpi_finalize")(library, "unroll_mpi_library")(error, "unroll_mpi_error");
    bool ok = bind.ok;
    if (!ok)
      why = "libunroll_mpi.so lacks unroll_mpi_* functions (from another unroll build?)";
    return ok;
  }
};

//===----------------------------------------------------------------------===//
// The watchdog: one thread per rank that ends the job when a collective
// waits too long.
//===----------------------------------------------------------------------===//

struct Communicator::Watchdog {
  std::mutex mutex;
  std::condition_variable wake;
  std::string what;   // the collective in flight
  double started = 0; // when it began (0: none)
  bool quit = false;
  std::thread thread;
};

/// Marks a collective in flight for the watchdog, and times it.
class Communicator::Watch {
public:
  Watch(Communicator &c, const std::string &what, double bytes) : c_(c), bytes_(bytes) {
    t0_ = now();
    if (Watchdog *w = c_.watchdog_) {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->what = what;
      w->started = t0_;
    }
  }
  ~Watch() {
    if (Watchdog *w = c_.watchdog_) {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->started = 0;
    }
    c_.account(now() - t0_, bytes_);
  }

private:
  Communicator &c_;
  double t0_, bytes_;
};

void Communicator::account(double seconds, double bytes) {
  Traffic &t = countGradient_ ? gradient_ : control_;
  t.seconds += seconds;
  t.bytes += bytes;
  ++t.calls;
}

//===----------------------------------------------------------------------===//
// NCCL, opened with dlopen
//===----------------------------------------------------------------------===//

#ifdef UNROLL_HAVE_NCCL
struct Communicator::Nccl {
  void *lib = nullptr;
  ncclComm_t comm = nullptr;
  void *stream = nullptr;
  void (*sync)() = nullptr;
  decltype(&ncclGetVersion) getVersion;
  decltype(&ncclGetUniqueId) getUniqueId;
  decltype(&ncclCommInitRank) commInitRank;
  decltype(&ncclAllReduce) allReduce;
  decltype(&ncclCommDestroy) commDestroy;
  decltype(&ncclCommAbort) commAbort;
  decltype(&ncclGetErrorString) errorString;

  bool open(std::string &why) {
    std::vector<std::string> paths;
    if (const char *home = getenv("CUDA_HOME"); home && *home) {
      paths.push_back(std::string(home) + "/lib/libnccl.so.2");
      paths.push_back(std::string(home) + "/lib64/libnccl.so.2");
    }
#ifdef UNROLL_NCCL_DIR
    paths.push_back(UNROLL_NCCL_DIR "/libnccl.so.2");
#endif
    paths.push_back("/usr/local/cuda/lib/libnccl.so.2");
    paths.push_back("/usr/local/cuda/lib64/libnccl.so.2");
    paths.push_back("libnccl.so.2");
    std::string errors;
    lib = openFirst(paths, RTLD_NOW | RTLD_LOCAL, false, errors);
    if (!lib) {
      why = "libnccl.so.2 cannot be loaded (looked in $CUDA_HOME/lib, /usr/local/cuda/lib and "
            "the loader's path" +
            (errors.empty() ? std::string() : ": " + errors) + ")";
      return false;
    }
    Binder bind{lib};
    bind(getVersion, "ncclGetVersion")(getUniqueId, "ncclGetUniqueId");
    bind(commInitRank, "ncclCommInitRank")(allReduce, "ncclAllReduce");
    bind(commDestroy, "ncclCommDestroy")(commAbort, "ncclCommAbort");
    bind(errorString, "ncclGetErrorString");
    bool ok = bind.ok;
    if (!ok)
      why = "libnccl.so.2 lacks one of ncclGetUniqueId, ncclCommInitRank, ncclAllReduce, ...";
    return ok;
  }
};
#else
struct Communicator::Nccl {};
#endif

//===----------------------------------------------------------------------===//
// Communicator
//===----------------------------------------------------------------------===//

Communicator &unroll::world() {
  static Communicator c;
  return c;
}

Communicator::~Communicator() {
  if (watchdog_) {
    {
      std::lock_guard<std::mutex> lock(watchdog_->mutex);
      watchdog_->quit = true;
    }
    watchdog_->wake.notify_all();
    if (watchdog_->thread.joinable())
      watchdog_->thread.join();
    delete watchdog_;
  }
#ifdef UNROLL_HAVE_NCCL
  // The communicator is left to the process's end: destroying it after the
  // library's context is gone could only fail.
#endif
  delete nccl_;
  delete mpi_;
}

std::string Communicator::who() const {
  return distributed() ? "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": "
                       : "";
}

bool Communicator::init(std::string &error) {
  int launched = 1;
  if (!launchedAsRanks(launched))
    return true;
  mpi_ = new Plugin;
  std::string why;
  if (!mpi_->open(why)) {
    delete mpi_;
    mpi_ = nullptr;
    if (launched <= 1)
      return true; // one rank: nothing to join
#ifdef UNROLL_HAVE_MPI
    error = "a launcher started " + std::to_string(launched) + " ranks, but " + why +
            "; install the MPI runtime this unroll-run was built with (Debian: openmpi-bin)";
#else
    error = "a launcher started " + std::to_string(launched) +
            " ranks, but mpirun support is not compiled in: this unroll-run was built without "
            "MPI (install libopenmpi-dev, then re-run cmake and rebuild)";
#endif
    return false;
  }
  int threadMultiple = 0;
  if (int rc = mpi_->init(&rank_, &size_, &localRank_, &localSize_, &threadMultiple)) {
    error = std::string("MPI_Init_thread failed: ") + mpi_->error(rc);
    return false;
  }
  threadMultiple_ = threadMultiple != 0;
  library_ = mpi_->library();
  if (!distributed())
    return true;
  watchdog_ = new Watchdog;
  watchdog_->thread = std::thread([this] {
    Watchdog &w = *watchdog_;
    std::unique_lock<std::mutex> lock(w.mutex);
    while (!w.quit) {
      w.wake.wait_for(lock, std::chrono::milliseconds(250));
      if (w.started > 0 && now() - w.started > timeout_) {
        fprintf(stderr,
                "unroll-run: error: %swaited %.0f s for the other ranks in the %s; a rank is "
                "stuck or gone (--rank-timeout sets the limit): ending the job\n",
                who().c_str(), now() - w.started, w.what.c_str());
        fflush(stderr);
        if (threadMultiple_)
          mpi_->abort(4);
        _exit(4); // the launcher ends the other ranks when one exits
      }
    }
  });
  return true;
}

void Communicator::fail(const std::string &message, int code) {
  fprintf(stderr, "unroll-run: error: %s%s\n", who().c_str(), message.c_str());
  fflush(stderr);
  if (mpi_)
    mpi_->abort(code);
  _exit(code);
}

void Communicator::allreduceSum(std::vector<double> &v, const std::string &what) {
  if (!distributed())
    return;
  Watch w(*this, what, 8.0 * v.size());
  if (int rc = mpi_->allreduce(v.data(), (int64_t)v.size()))
    fail("MPI_Allreduce (" + what + ") failed: " + mpi_->error(rc));
}

void Communicator::broadcast(std::string &text, const std::string &what) {
  if (!distributed())
    return;
  Watch w(*this, what, 8.0 + text.size());
  int64_t n = (int64_t)text.size();
  if (int rc = mpi_->bcast(&n, sizeof n, 0))
    fail("MPI_Bcast (" + what + ") failed: " + mpi_->error(rc));
  text.resize(n);
  if (int rc = mpi_->bcast(text.data(), n, 0))
    fail("MPI_Bcast (" + what + ") failed: " + mpi_->error(rc));
}

void Communicator::broadcast(std::vector<double> &v, const std::string &what) {
  if (!distributed())
    return;
  Watch w(*this, what, 8.0 * (v.size() + 1));
  int64_t n = (int64_t)v.size();
  if (int rc = mpi_->bcast(&n, sizeof n, 0))
    fail("MPI_Bcast (" + what + ") failed: " + mpi_->error(rc));
  v.resize(n);
  if (int rc = mpi_->bcast(v.data(), 8 * n, 0))
    fail("MPI_Bcast (" + what + ") failed: " + mpi_->error(rc));
}

std::vector<double> Communicator::allgather(const std::vector<double> &mine,
                                            const std::string &what) {
  if (!distributed())
    return mine;
  std::vector<double> all(mine.size() * size_);
  Watch w(*this, what, 8.0 * all.size());
  if (int rc = mpi_->allgather(mine.data(), 8 * (int64_t)mine.size(), all.data()))
    fail("MPI_Allgather (" + what + ") failed: " + mpi_->error(rc));
  return all;
}

int Communicator::firstFailure(bool ok, const std::string &what) {
  if (!distributed())
    return ok ? -1 : 0;
  std::vector<double> all = allgather({ok ? 1.0 : 0.0}, what);
  for (int r = 0; r < size_; ++r)
    if (all[r] == 0.0)
      return r;
  return -1;
}

bool Communicator::initNccl(const Model &m, std::string &error) {
#ifndef UNROLL_HAVE_NCCL
  (void)m;
  error = "NCCL support is not compiled in (nccl.h was not found under the CUDA toolkit when "
          "unroll was built)";
  return false;
#else
  if (!distributed())
    return true;
  // What this rank can do alone first; then every rank learns whether all
  // could, so that none waits in a collective the others skip.
  auto stream = reinterpret_cast<void *(*)()>(m.symbol("unroll_gpu_stream"));
  auto sync = reinterpret_cast<void (*)()>(m.symbol("unroll_gpu_sync"));
  auto count = reinterpret_cast<int32_t (*)()>(m.symbol("unroll_gpu_device_count"));
  Nccl *n = new Nccl;
  bool ok = true;
  if (!stream || !sync || !count) {
    error = m.path() + ": the GPU library's runtime has no unroll_gpu_stream (rebuild it with "
                       "this unroll-translate)";
    ok = false;
  } else if (localSize_ > count()) {
    // One GPU per rank: NCCL refuses two ranks on one device.
    error = std::to_string(localSize_) + " ranks on this node but " + std::to_string(count()) +
            " GPU(s): NCCL needs one GPU per rank (start fewer ranks, or use --allreduce mpi)";
    ok = false;
  } else {
    ok = n->open(error);
  }
  int bad = firstFailure(ok, "NCCL set-up");
  if (bad >= 0) {
    if (ok)
      error = "NCCL cannot be used on rank " + std::to_string(bad);
    delete n;
    return false;
  }
  n->stream = stream(); // also makes the library's context current here
  n->sync = sync;
  int version = 0;
  n->getVersion(&version);
  ncclVersion_ = "NCCL " + std::to_string(version / 10000) + "." +
                 std::to_string(version / 100 % 100) + "." + std::to_string(version % 100);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  ncclResult_t r = ncclSuccess;
  if (root())
    r = n->getUniqueId(&id);
  // The id crosses as text: a broadcast of bytes through the string helper.
  std::string idText(reinterpret_cast<const char *>(&id), sizeof id);
  bad = firstFailure(r == ncclSuccess, "NCCL unique id");
  if (bad >= 0) {
    error = "ncclGetUniqueId failed on rank 0" +
            (r != ncclSuccess ? std::string(": ") + n->errorString(r) : std::string());
    delete n;
    return false;
  }
  broadcast(idText, "NCCL unique id");
  std::memcpy(&id, idText.data(), sizeof id);
  {
    Watch w(*this, "NCCL communicator set-up", 0);
    r = n->commInitRank(&n->comm, size_, id, rank_);
  }
  bad = firstFailure(r == ncclSuccess, "NCCL communicator set-up");
  if (bad >= 0) {
    error = r != ncclSuccess ? std::string("ncclCommInitRank failed: ") + n->errorString(r)
                             : "ncclCommInitRank failed on rank " + std::to_string(bad);
    delete n;
    return false;
  }
  nccl_ = n;
  return true;
#endif
}

void Communicator::allreduceMeanDevice(const void *send, void *recv, int64_t count, bool f32,
                                       const std::string &what) {
#ifdef UNROLL_HAVE_NCCL
  if (!distributed() || !nccl_)
    return;
  Watch w(*this, what, double(count) * (f32 ? 4 : 8));
  ncclResult_t r =
      nccl_->allReduce(send, recv, static_cast<size_t>(count), f32 ? ncclFloat32 : ncclFloat64,
                       ncclAvg, nccl_->comm, static_cast<cudaStream_t>(nccl_->stream));
  if (r != ncclSuccess)
    fail("ncclAllReduce (" + what + ") failed: " + nccl_->errorString(r));
  nccl_->sync();
#else
  (void)send, (void)recv, (void)count, (void)f32, (void)what;
#endif
}

int Communicator::finish(int rc) {
  if (!mpi_ || finished_)
    return rc;
  finished_ = true;
  if (distributed() && rc != 0 && !agreed_) {
    fflush(stdout);
    fflush(stderr);
    mpi_->abort(rc); // this rank alone failed: end the job
    _exit(rc);
  }
  if (distributed()) {
    // Rank 0 may still be evaluating: wait without spinning.
    if (int e = mpi_->barrier())
      fail(std::string("MPI_Ibarrier at the end failed: ") + mpi_->error(e));
  }
  if (watchdog_) {
    {
      std::lock_guard<std::mutex> lock(watchdog_->mutex);
      watchdog_->quit = true;
    }
    watchdog_->wake.notify_all();
    watchdog_->thread.join();
  }
  mpi_->finalize();
  return rc;
}
