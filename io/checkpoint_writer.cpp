#include "io/checkpoint_writer.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace hfta {

namespace {

double seconds_between(CheckpointSchedule::Clock::time_point a,
                       CheckpointSchedule::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void CheckpointSchedule::start(int64_t step, Clock::time_point now) {
  last_step = step;
  last_time = now;
}

bool CheckpointSchedule::due(int64_t step, Clock::time_point now) const {
  if (every_steps > 0 && step - last_step >= every_steps) return true;
  return interval_seconds > 0.0 && seconds_between(last_time, now) >= interval_seconds;
}

CheckpointWriter::CheckpointWriter(WriteFn write)
    : write_(std::move(write)), thread_([this] { run(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool CheckpointWriter::idle() const {
  std::lock_guard lock(mutex_);
  return !busy_;
}

bool CheckpointWriter::submit(const std::string& path, double copy_seconds) {
  {
    std::lock_guard lock(mutex_);
    if (busy_) return false;
    busy_ = true;
    path_ = path;
    copy_seconds_ = copy_seconds;
  }
  cv_.notify_all();
  return true;
}

bool CheckpointWriter::prepare(std::function<void(Checkpoint&)> job) {
  {
    std::lock_guard lock(mutex_);
    if (busy_) return false;
    busy_ = true;
    job_ = std::move(job);
  }
  cv_.notify_all();
  return true;
}

std::optional<CheckpointWritten> CheckpointWriter::poll() {
  std::lock_guard lock(mutex_);
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  std::optional<CheckpointWritten> done = std::move(done_);
  done_.reset();
  return done;
}

std::optional<CheckpointWritten> CheckpointWriter::wait() {
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !busy_; });
  }
  return poll();
}

void CheckpointWriter::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return busy_ || stop_; });
    if (!busy_) return;  // stop_ with nothing to write
    // The training thread leaves the snapshot alone while busy_: it is used without the lock.
    if (job_) {
      std::function<void(Checkpoint&)> job = std::move(job_);
      job_ = nullptr;
      lock.unlock();
      std::exception_ptr error;
      try {
        job(snapshot_);
      } catch (const std::exception& e) {
        error = std::make_exception_ptr(
            Error(fmt::format("cannot prepare the periodic checkpoint snapshot: {}", e.what())));
      }
      lock.lock();
      if (error) error_ = error;
      busy_ = false;
      cv_.notify_all();
      continue;
    }
    const std::string path = path_;
    CheckpointWritten written{.path = path, .step = snapshot_.step, .copy_seconds = copy_seconds_};
    lock.unlock();
    const auto start = CheckpointSchedule::Clock::now();
    std::exception_ptr error;
    try {
      write_(path, snapshot_);
    } catch (const Error& e) {
      error = std::make_exception_ptr(
          Error(fmt::format("periodic checkpoint of step {}: {}", written.step, e.what())));
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(Error(fmt::format(
          "periodic checkpoint of step {}: cannot write {}: {}", written.step, path, e.what())));
    }
    written.write_seconds = seconds_between(start, CheckpointSchedule::Clock::now());
    lock.lock();
    if (error)
      error_ = error;
    else
      done_ = written;
    busy_ = false;
    cv_.notify_all();
  }
}

PeriodicCheckpoints::PeriodicCheckpoints(std::string path, CheckpointSchedule schedule,
                                         std::function<void(Checkpoint&)> fill,
                                         std::function<void(const std::string&)> log,
                                         std::function<void(Checkpoint&)> reserve,
                                         CheckpointWriter::WriteFn write)
    : path_(std::move(path)),
      schedule_(schedule),
      fill_(std::move(fill)),
      log_(std::move(log)),
      reserve_(std::move(reserve)),
      writer_(std::move(write)) {
  HFTA_CHECK(schedule_.every_steps >= 0, "--checkpoint-every must be 0 (off) or more, got {}",
             schedule_.every_steps);
  HFTA_CHECK(std::isfinite(schedule_.interval_seconds) && schedule_.interval_seconds >= 0.0,
             "--checkpoint-interval must be 0 (off) or a positive duration, got {} s",
             schedule_.interval_seconds);
}

void PeriodicCheckpoints::start(int64_t step) {
  const auto now = CheckpointSchedule::Clock::now();
  schedule_.start(step, now);
  reserved_ = false;
  reserve_when_near(now);
}

void PeriodicCheckpoints::reserve_when_near(CheckpointSchedule::Clock::time_point now) {
  if (reserved_ || !schedule_.enabled() || !reserve_) return;
  // Steps may come seconds apart: a step schedule reserves at once. An interval one waits for
  // half its interval, so that a run ending before its first snapshot never holds the buffer
  // (every model's parameters and optimizer state).
  if (schedule_.every_steps == 0 &&
      seconds_between(schedule_.last_time, now) < 0.5 * schedule_.interval_seconds)
    return;
  reserved_ = writer_.prepare(reserve_);
}

void PeriodicCheckpoints::after_step(int64_t step) {
  if (!schedule_.enabled()) return;
  report(writer_.poll());
  const auto now = CheckpointSchedule::Clock::now();
  reserve_when_near(now);
  if (!schedule_.due(step, now)) return;
  if (!writer_.idle()) {
    if (delayed_since_ < 0) {
      delayed_since_ = step;
      log_(
          fmt::format("checkpoint due at step {} delayed: the background writer is still busy "
                      "with the previous one",
                      step));
    }
    return;
  }
  fill_(writer_.snapshot());
  const double copy_seconds = seconds_between(now, CheckpointSchedule::Clock::now());
  writer_.submit(path_, copy_seconds);
  schedule_.taken(step, now);
  delayed_since_ = -1;
}

namespace {

// The snapshot filled with borrowed tensors for as long as this lives: afterwards it borrows
// nothing, so a later periodic snapshot copies again and the writer thread never reads a live
// tensor.
class Borrowing {
 public:
  Borrowing(Checkpoint& c, const std::function<void(Checkpoint&)>& fill) : c_(c) {
    c_.borrow_tensors = true;
    try {
      fill(c_);
    } catch (...) {
      release();  // a fill that failed partway may have borrowed some tensors
      throw;
    }
    c_.borrow_tensors = false;
  }
  ~Borrowing() { release(); }
  Borrowing(const Borrowing&) = delete;
  Borrowing& operator=(const Borrowing&) = delete;

 private:
  void release() {
    c_.borrow_tensors = false;
    for (CheckpointTensor& t : c_.tensors) t.source = nullptr;
  }
  Checkpoint& c_;
};

}  // namespace

void PeriodicCheckpoints::save_now(int64_t step) {
  wait();
  // Written here while the array stands still: the tensors are read in place, not copied into
  // the snapshot (its buffer, if periodic checkpoints keep one, stays as it was).
  Checkpoint& c = writer_.snapshot();
  const Borrowing borrowing(c, fill_);
  save_checkpoint(path_, c);
  schedule_.taken(step, CheckpointSchedule::Clock::now());
  // Without periodic checkpoints the buffer would sit unused until the next epoch ends.
  if (!schedule_.enabled()) writer_.snapshot() = Checkpoint{};
}

void PeriodicCheckpoints::inspect_now(const std::function<void(const Checkpoint&)>& use) {
  wait();
  {
    const Borrowing borrowing(writer_.snapshot(), fill_);
    use(writer_.snapshot());
  }
  if (!schedule_.enabled()) writer_.snapshot() = Checkpoint{};
}

void PeriodicCheckpoints::wait() {
  report(writer_.wait());
  delayed_since_ = -1;
}

void PeriodicCheckpoints::report(const std::optional<CheckpointWritten>& w) {
  if (!w) return;
  log_(
      fmt::format("checkpoint of step {} written to {} (copy {:.1f} ms while training waited, "
                  "write {:.1f} ms in the background)",
                  w->step, w->path, 1e3 * w->copy_seconds, 1e3 * w->write_seconds));
}

}  // namespace hfta
