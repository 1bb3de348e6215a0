// Periodic checkpoints written while training goes on (`hfta train --checkpoint-every N`,
// `--checkpoint-interval 5m`).
//
// At a due step the training thread copies the array into a snapshot (a Checkpoint whose vectors
// are reused from one snapshot to the next) and hands it to one background thread, which
// serializes it and writes it atomically (save_checkpoint: temporary file, fsync, rename). At
// most one write is in flight, and the snapshot buffer is the writer's: a snapshot that falls due
// while the previous one is still being written is delayed to the first step after that write
// ends, so a slow disk delays the next checkpoint, never the training. A failed write (disk full,
// permission) is rethrown on the training thread at its next step, or by wait().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "io/checkpoint.h"

namespace hfta {

// When periodic checkpoints fall due: every `every_steps` optimizer steps and/or every
// `interval_seconds` of training, counted from the last snapshot taken (or the start); 0 turns
// either off.
struct CheckpointSchedule {
  using Clock = std::chrono::steady_clock;
  int64_t every_steps = 0;
  double interval_seconds = 0.0;
  // Where the count starts: the last snapshot taken, or the start.
  int64_t last_step = 0;
  Clock::time_point last_time{};

  bool enabled() const { return every_steps > 0 || interval_seconds > 0.0; }
  // Starts counting from `step` at `now` (the run's first step, or a resumed one).
  void start(int64_t step, Clock::time_point now);
  bool due(int64_t step, Clock::time_point now) const;
  // A snapshot of `step` was taken at `now`: the next one falls due from here.
  void taken(int64_t step, Clock::time_point now) { start(step, now); }
};

// One finished background write.
struct CheckpointWritten {
  std::string path;
  int64_t step = 0;
  double copy_seconds = 0.0;   // the snapshot copy, on the training thread
  double write_seconds = 0.0;  // serializing, writing and fsync, on the writer thread
};

// One background thread writing one snapshot at a time.
class CheckpointWriter {
 public:
  // How a snapshot is written; save_checkpoint, or a stand-in in tests.
  using WriteFn = std::function<void(const std::string& path, const Checkpoint& snapshot)>;
  explicit CheckpointWriter(WriteFn write = save_checkpoint);
  // Waits for the write in flight (its error, if any, is dropped: the caller is already leaving
  // through an exception or has called wait()).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // True when no write is in flight: snapshot() may be filled and submitted.
  bool idle() const;
  // The snapshot buffer. Only the training thread touches it, and only while idle().
  Checkpoint& snapshot() { return snapshot_; }
  // Starts writing snapshot() to `path` (`copy_seconds`: what filling it took, for the report).
  // Returns false, and starts nothing, while the previous write is in flight.
  bool submit(const std::string& path, double copy_seconds = 0.0);
  // Runs `job` on the snapshot in the background instead of a write (allocating it ahead of the
  // first snapshot); the writer is busy meanwhile. Returns false while it is busy.
  bool prepare(std::function<void(Checkpoint&)> job);
  // The write that finished since the last call, once; rethrows its error (hfta::Error naming
  // the file) when it failed.
  std::optional<CheckpointWritten> poll();
  // Waits until no write is in flight; then as poll().
  std::optional<CheckpointWritten> wait();

 private:
  void run();

  WriteFn write_;
  Checkpoint snapshot_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool busy_ = false, stop_ = false;
  std::string path_;
  std::function<void(Checkpoint&)> job_;  // set: the background task is this, not a write
  double copy_seconds_ = 0.0;
  std::optional<CheckpointWritten> done_;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the members above exist
};

// The periodic checkpoints of one array in `hfta train`: the schedule, the writer and the log.
class PeriodicCheckpoints {
 public:
  // `fill` copies the array and its progress into a snapshot; `log` prints one line; `reserve`
  // (if given) sizes a snapshot without reading the array, run in the background ahead of the
  // first periodic snapshot (at start() for a step schedule, halfway to the first one for an
  // interval) so that the snapshot does not pay for allocating and faulting in its memory and
  // a run that ends before it never holds that memory; `write`
  // writes a snapshot in the background (tests give a slow or failing one). Throws hfta::Error
  // for a negative or non-finite schedule.
  PeriodicCheckpoints(std::string path, CheckpointSchedule schedule,
                      std::function<void(Checkpoint&)> fill,
                      std::function<void(const std::string&)> log,
                      std::function<void(Checkpoint&)> reserve = {},
                      CheckpointWriter::WriteFn write = save_checkpoint);
  // Starts the schedule at `step` (the first step of this process: 0, or the resumed step).
  void start(int64_t step);
  // After optimizer step `step`: reports a finished write (rethrowing its error), then takes a
  // snapshot if one is due and the writer is free, or logs that it is delayed.
  void after_step(int64_t step);
  // Waits for the write in flight, reports it, then writes a checkpoint of now on this thread
  // (epoch ends, Ctrl-C): files are never written concurrently. The tensors are read in place
  // (Checkpoint::borrow_tensors), so the save holds no copy of the array. The schedule counts
  // from `step`.
  void save_now(int64_t step);
  // Waits for the write in flight and reports it (at the end of the run).
  void wait();
  // Waits for the write in flight, then fills the snapshot with now, borrowing the tensors as
  // save_now does, and hands it to `use` without writing it (the end of a run: what each model's
  // state hashes to, model_state_crc32s): nothing is copied.
  void inspect_now(const std::function<void(const Checkpoint&)>& use);

 private:
  void report(const std::optional<CheckpointWritten>& written);
  // Starts `reserve_` on the writer thread once the first periodic snapshot is near (above).
  void reserve_when_near(CheckpointSchedule::Clock::time_point now);

  std::string path_;
  CheckpointSchedule schedule_;
  std::function<void(Checkpoint&)> fill_;
  std::function<void(const std::string&)> log_;
  std::function<void(Checkpoint&)> reserve_;
  CheckpointWriter writer_;
  int64_t delayed_since_ = -1;  // the step a snapshot fell due while the writer was busy
  bool reserved_ = false;       // reserve_ has been started
};

}  // namespace hfta
