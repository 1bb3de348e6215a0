// `mpirun -np K hfta tune`: the arrays of each scheduler batch sharded over K MPI ranks.
//
// Rank 0 runs the scheduler (tune_scheduler.h), keeps the search state and writes every output
// (history.csv, trajectory, best model). Each batch's arrays (the same arrays one process would
// train: same trials, same budgets, same array sizes, so the same metrics) go to a queue; rank 0
// hands one array at a time to each idle rank (MPI_Send of a small JSON task) and gets back its
// outcomes and history rows (MPI_Send of a small JSON result), so ranks that finish early take
// the next array. With K <= kRank0TrainsUpTo ranks, rank 0 trains arrays too whenever every
// other rank is busy (one rank in K idle would waste 1/K of the cores); with more ranks it only
// coordinates, because an array it trained would keep it from handing work to idle ranks for
// that array's whole duration.
//
// Trials' checkpoints live in the shared --out directory: a trial promoted to a higher budget
// continues on whichever rank gets it from the checkpoint its last rung wrote. So ranks must share
// --out: one machine, or a shared filesystem (NFS, Lustre) mounted at the same path everywhere.
//
// Failures: an array whose training throws on any rank is marked failed (as in one process) and
// the search goes on. A rank whose result does not come within --rank-timeout seconds, or whose
// send fails (MPI_ERRORS_RETURN), is declared dead: the trials of its array are failed and it
// gets no more work. Limit: OpenMPI 4 (Debian's) aborts the whole job when a rank's process
// exits, unless mpirun runs with --enable-recovery; the timeout then covers hung ranks and,
// with --enable-recovery, ranks that died.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tune/tune_scheduler.h"

namespace hfta {

// Rank 0 trains arrays too when the world has at most this many ranks.
constexpr int kRank0TrainsUpTo = 4;

// One array of a batch: these jobs train together from budget `start` to `to`.
struct TuneArrayTask {
  int64_t start = 0, to = 0;
  std::vector<TuneJob> jobs;
};

struct TuneArrayResult {
  std::vector<TuneOutcome> outcomes;           // per job, in task order
  std::vector<std::vector<std::string>> rows;  // history rows, written by rank 0
  double wall_s = 0;                           // the array's training time on its rank
  int rank = 0;                                // which rank trained it
  // The array never trained (its rank died, or threw before any row): rank 0 writes its rows.
  bool lost = false;
  std::string error;
};

using TuneArrayTrainer = std::function<TuneArrayResult(const TuneArrayTask&)>;

// True when this process runs under mpirun with more than one rank (OMPI_COMM_WORLD_SIZE or
// PMI_SIZE > 1): the single-process path never touches MPI.
bool tune_mpi_launched();
// True when hfta was built with MPI (HFTA_HAVE_MPI).
bool tune_mpi_available();

class TuneMpi {
 public:
  // Initializes MPI; throws hfta::Error when hfta was built without it.
  TuneMpi();
  ~TuneMpi();  // MPI_Finalize (after finish() on rank 0)
  TuneMpi(const TuneMpi&) = delete;
  TuneMpi& operator=(const TuneMpi&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ranks on this machine (OMPI_COMM_WORLD_LOCAL_SIZE; the world size when unknown).
  int local_size() const;
  // The threads of one rank: the cores mpirun bound it to, else this machine's cores divided
  // among its ranks.
  int default_threads() const;

  double rank_timeout_s = 24 * 3600.0;

  // Rank 0: trains `tasks` over the ranks; calls `done(task index, result)` as each result
  // arrives (rank 0 writes its rows then: a crash keeps what finished) and returns the results
  // in task order.
  using TuneArrayDone = std::function<void(size_t, const TuneArrayResult&)>;
  std::vector<TuneArrayResult> run(const std::vector<TuneArrayTask>& tasks,
                                   const TuneArrayTrainer& train, const TuneArrayDone& done);
  // Ranks > 0: trains what rank 0 sends until it says stop.
  void serve(const TuneArrayTrainer& train);
  // Rank 0: tells the live ranks to stop.
  void finish();
  // The ranks declared dead so far (rank 0).
  const std::vector<int>& dead_ranks() const { return dead_; }

 private:
  int rank_ = 0, size_ = 1;
  std::vector<int> dead_;
  bool finished_ = false;
};

// Trains a task with `train`, turning an exception into a lost result (its trials fail) instead
// of ending the rank. Test hook: HFTA_TUNE_TEST_FAIL_TRIAL=<t> throws for the array holding trial
// t, on whichever rank trains it.
TuneArrayResult train_array_guarded(const TuneArrayTask& task, const TuneArrayTrainer& train,
                                    int rank);

// The JSON messages (exposed for tests).
std::string encode_task(const TuneArrayTask& task);
TuneArrayTask decode_task(const std::string& text);
std::string encode_result(const TuneArrayResult& result);
TuneArrayResult decode_result(const std::string& text);

}  // namespace hfta
