// The MPI executor of `hfta tune` (tune_mpi.h): rank 0 queues arrays, other ranks train them.
#include "tune/tune_mpi.h"

#include <fmt/format.h>
#include <sched.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "io/interrupt.h"

#ifdef HFTA_HAVE_MPI
#include <mpi.h>
#endif

namespace hfta {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? 0 : std::atoi(v);
}

// NaN travels as null (JSON has no NaN).
nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }
double num(const nlohmann::json& j) { return j.is_null() ? NAN : j.get<double>(); }

constexpr int kTagTask = 1, kTagResult = 2, kTagStop = 3;

}  // namespace

bool tune_mpi_launched() {
  return env_int("OMPI_COMM_WORLD_SIZE") > 1 || env_int("PMI_SIZE") > 1 || env_int("PMIX_SIZE") > 1;
}

bool tune_mpi_available() {
#ifdef HFTA_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string encode_task(const TuneArrayTask& task) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const TuneJob& j : task.jobs) jobs.push_back({j.trial, j.from, j.to, j.bracket, j.rung});
  return nlohmann::json{{"start", task.start}, {"to", task.to}, {"jobs", jobs}}.dump();
}

TuneArrayTask decode_task(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  TuneArrayTask t{.start = j["start"], .to = j["to"]};
  for (const auto& a : j["jobs"])
    t.jobs.push_back({.trial = a[0], .from = a[1], .to = a[2], .bracket = a[3], .rung = a[4]});
  return t;
}

std::string encode_result(const TuneArrayResult& r) {
  nlohmann::json outcomes = nlohmann::json::array();
  for (const TuneOutcome& o : r.outcomes) outcomes.push_back({num(o.metric), o.failed});
  return nlohmann::json{{"outcomes", outcomes}, {"rows", r.rows}, {"wall_s", r.wall_s},
                        {"rank", r.rank},       {"lost", r.lost}, {"error", r.error}}
      .dump();
}

TuneArrayResult decode_result(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  TuneArrayResult r;
  for (const auto& o : j["outcomes"]) r.outcomes.push_back({.metric = num(o[0]), .failed = o[1]});
  r.rows = j["rows"].get<std::vector<std::vector<std::string>>>();
  r.wall_s = j["wall_s"];
  r.rank = j["rank"];
  r.lost = j["lost"];
  r.error = j["error"];
  return r;
}

TuneArrayResult train_array_guarded(const TuneArrayTask& task, const TuneArrayTrainer& train,
                                    int rank) {
  const auto start = std::chrono::steady_clock::now();
  TuneArrayResult r;
  try {
    if (const char* t = std::getenv("HFTA_TUNE_TEST_FAIL_TRIAL"); t != nullptr)
      for (const TuneJob& j : task.jobs)
        if (j.trial == std::atoll(t))
          fail("test failure of trial {} on rank {} (HFTA_TUNE_TEST_FAIL_TRIAL)", j.trial, rank);
    r = train(task);
  } catch (const std::exception& e) {
    // An interrupt ends the search (rank 0 saved what finished; --resume continues).
    if (InterruptGuard::interrupted()) throw;
    r = {};
    r.lost = true;
    r.error = e.what();
  }
  r.rank = rank;
  if (r.wall_s == 0) r.wall_s = seconds_since(start);
  if (r.lost) r.outcomes.assign(task.jobs.size(), {.metric = NAN, .failed = true});
  return r;
}

int TuneMpi::local_size() const {
  const int local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  return local > 0 ? local : size_;
}

int TuneMpi::default_threads() const {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int mine = CPU_COUNT(&set);
    // mpirun bound this rank to some cores (its default --bind-to core): use those.
    if (mine > 0 && mine < cores) return mine;
  }
  return std::max(1, cores / std::max(1, local_size()));
}

#ifdef HFTA_HAVE_MPI

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail("MPI {} failed: {}", what, std::string(text, static_cast<size_t>(len)));
}

int send_text(const std::string& text, int to, int tag) {
  return MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

std::string recv_text(const MPI_Status& probed) {
  int count = 0;
  MPI_Get_count(&probed, MPI_CHAR, &count);
  std::string text(static_cast<size_t>(count), '\0');
  check_mpi(MPI_Recv(text.data(), count, MPI_CHAR, probed.MPI_SOURCE, probed.MPI_TAG,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "receive");
  return text;
}

}  // namespace

TuneMpi::TuneMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Only the main thread calls MPI; OpenMP threads train.
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
  }
  // Errors come back as codes: a dead peer fails one send, not the whole search.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

TuneMpi::~TuneMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // MPI_Finalize waits for every rank, a dead one too (seen hanging with OpenMPI 4.1 under
  // --enable-recovery): with a rank lost, rank 0 leaves without it.
  if (!finalized && dead_.empty()) MPI_Finalize();
}

std::vector<TuneArrayResult> TuneMpi::run(const std::vector<TuneArrayTask>& tasks,
                                          const TuneArrayTrainer& train,
                                          const TuneArrayDone& on_done) {
  std::vector<TuneArrayResult> results(tasks.size());
  std::deque<size_t> pending;
  for (size_t i = 0; i < tasks.size(); ++i) pending.push_back(i);
  struct InFlight {
    size_t task;
    std::chrono::steady_clock::time_point since;
  };
  std::map<int, InFlight> busy;
  auto is_dead = [&](int r) { return std::find(dead_.begin(), dead_.end(), r) != dead_.end(); };
  const bool rank0_trains = size_ <= kRank0TrainsUpTo;
  size_t done = 0;
  while (done < tasks.size()) {
    // Hand an array to every idle live rank.
    for (int r = 1; r < size_ && !pending.empty(); ++r) {
      if (is_dead(r) || busy.contains(r)) continue;
      const size_t i = pending.front();
      if (send_text(encode_task(tasks[i]), r, kTagTask) != MPI_SUCCESS) {
        fmt::print(stderr, "rank {} is unreachable: it gets no more arrays\n", r);
        dead_.push_back(r);  // the task stays queued for another rank
        continue;
      }
      pending.pop_front();
      busy[r] = {i, std::chrono::steady_clock::now()};
    }
    // Collect what came back.
    int flag = 0;
    MPI_Status status;
    while (MPI_Iprobe(MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &flag, &status) == MPI_SUCCESS &&
           flag) {
      const std::string text = recv_text(status);
      auto it = busy.find(status.MPI_SOURCE);
      if (it == busy.end()) continue;  // a rank declared dead came back late: ignored
      results[it->second.task] = decode_result(text);
      on_done(it->second.task, results[it->second.task]);
      busy.erase(it);
      ++done;
    }
    // Ranks past the timeout: their arrays fail.
    for (auto it = busy.begin(); it != busy.end();) {
      const double waited = seconds_since(it->second.since);
      if (waited <= rank_timeout_s) {
        ++it;
        continue;
      }
      fmt::print(stderr, "rank {} sent nothing for {:.0f} s (--rank-timeout): its trials fail\n",
                 it->first, waited);
      TuneArrayResult& r = results[it->second.task];
      r.lost = true;
      r.rank = it->first;
      r.error = fmt::format("rank {} timed out", it->first);
      r.outcomes.assign(tasks[it->second.task].jobs.size(), {.metric = NAN, .failed = true});
      r.wall_s = waited;
      on_done(it->second.task, r);
      dead_.push_back(it->first);
      it = busy.erase(it);
      ++done;
    }
    const bool any_live = static_cast<int>(dead_.size()) < size_ - 1;
    if (!pending.empty() && (rank0_trains || !any_live) &&
        (busy.size() + dead_.size() == static_cast<size_t>(size_ - 1))) {
      // Every other rank is busy (or dead): rank 0 trains the next array itself.
      const size_t i = pending.front();
      pending.pop_front();
      results[i] = train_array_guarded(tasks[i], train, 0);
      on_done(i, results[i]);
      ++done;
      continue;
    }
    if (done < tasks.size()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return results;
}

void TuneMpi::serve(const TuneArrayTrainer& train) {
  for (;;) {
    MPI_Status status;
    check_mpi(MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &status), "probe");
    const std::string text = recv_text(status);
    if (status.MPI_TAG == kTagStop) return;
    const TuneArrayTask task = decode_task(text);
    // Test hook: this rank's process dies (as a crash would) on the array holding trial t.
    if (const char* t = std::getenv("HFTA_TUNE_TEST_EXIT_TRIAL"); t != nullptr)
      for (const TuneJob& j : task.jobs)
        if (j.trial == std::atoll(t)) std::_Exit(3);
    const TuneArrayResult r = train_array_guarded(task, train, rank_);
    check_mpi(send_text(encode_result(r), 0, kTagResult), "send to rank 0");
  }
}

void TuneMpi::finish() {
  if (finished_ || rank_ != 0) return;
  finished_ = true;
  for (int r = 1; r < size_; ++r)
    if (std::find(dead_.begin(), dead_.end(), r) == dead_.end()) send_text("", r, kTagStop);
}

#else  // no MPI

TuneMpi::TuneMpi() {
  fail(
      "this hfta was built without MPI, so it cannot run under mpirun: apt-get install "
      "libopenmpi-dev openmpi-bin, configure again (cmake -S . -B build) and rebuild; or run "
      "hfta tune without mpirun");
}
TuneMpi::~TuneMpi() = default;
std::vector<TuneArrayResult> TuneMpi::run(const std::vector<TuneArrayTask>&,
                                          const TuneArrayTrainer&, const TuneArrayDone&) {
  return {};
}
void TuneMpi::serve(const TuneArrayTrainer&) {}
void TuneMpi::finish() {}

#endif

}  // namespace hfta
