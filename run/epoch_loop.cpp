#include "run/epoch_loop.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "io/checkpoint_writer.h"
#include "io/interrupt.h"
#include "io/progress.h"

namespace hfta {

ArrayProgress RunArray::fresh_progress() const {
  const size_t n = static_cast<size_t>(models());
  return {.epoch_loss = std::vector<double>(n, 0.0),
          .last_train_loss = std::vector<double>(n, 0.0),
          .skipped = std::vector<int64_t>(n, 0)};
}

std::string ModelResult::state_crc32_text() const { return fmt::format("{:08x}", state_crc32); }

ValidationScores RunArray::validate() { fail("this model has no validation metric to search by"); }

void run_epochs(RunArray& array, const TrainOptions& o, const EpochLoopOptions& loop,
                const Checkpoint* resume_from, std::vector<ModelResult>& results) {
  const auto start = Clock::now();
  const size_t B = static_cast<size_t>(array.models());
  ArrayProgress p = array.fresh_progress();
  if (resume_from != nullptr) {
    p = array.restore(*resume_from);
    if (p.skipped.size() != B) p.skipped.assign(B, 0);
    fmt::print("{}: resuming after step {} (epoch {}, batch {})\n", loop.who, p.step,
               p.epochs_done + 1, p.batch_in_epoch);
  }
  // Mid-epoch lines must not land inside a progress bar: the bar in use is cleared first.
  ProgressBar* current_bar = nullptr;
  PeriodicCheckpoints periodic(
      loop.checkpoint_path,
      {.every_steps = o.checkpoint ? o.checkpoint_every : 0,
       .interval_seconds = o.checkpoint ? o.checkpoint_interval_seconds : 0.0},
      [&](Checkpoint& c) { array.fill_checkpoint(c, p); },
      [&](const std::string& line) {
        if (current_bar != nullptr) current_bar->finish();
        fmt::print("{}: {}\n", loop.who, line);
        std::fflush(stdout);  // a killed run's log shows every checkpoint it wrote
      },
      [&](Checkpoint& c) { array.reserve_checkpoint(c); });
  periodic.start(p.step);
  if (loop.announce_checkpoints && o.checkpoint &&
      (o.checkpoint_every > 0 || o.checkpoint_interval_seconds > 0))
    fmt::print("checkpoints {} in the background, and after every epoch\n",
               o.checkpoint_every > 0 && o.checkpoint_interval_seconds > 0
                   ? fmt::format("every {} steps and every {:g} s", o.checkpoint_every,
                                 o.checkpoint_interval_seconds)
               : o.checkpoint_every > 0
                   ? fmt::format("every {} steps", o.checkpoint_every)
                   : fmt::format("every {:g} s", o.checkpoint_interval_seconds));
  auto save = [&] {
    if (o.checkpoint) periodic.save_now(p.step);
  };

  bool trained = false;
  for (int64_t epoch = p.epochs_done; epoch < o.epochs; ++epoch) {
    trained = true;
    int64_t epoch_steps = p.batch_in_epoch;  // resuming inside this epoch: its first are done
    if (epoch_steps == 0) std::fill(p.epoch_loss.begin(), p.epoch_loss.end(), 0.0);
    array.begin_epoch(epoch, epoch_steps);
    ProgressBar bar(fmt::format("epoch {}/{} {}", epoch + 1, o.epochs, loop.who),
                    array.steps_per_epoch(), o.progress && stdout_is_terminal());
    current_bar = &bar;
    const int64_t resumed_steps = epoch_steps;
    const auto epoch_start = Clock::now();
    array.train_epoch([&](const TrainedStepView& step) {
      ++p.step;
      p.batch_in_epoch = ++epoch_steps;
      for (size_t b = 0; b < B; ++b) {
        p.epoch_loss[b] += step.losses[b];
        if (!step.skipped.empty() && step.skipped[b]) ++p.skipped[b];
      }
      if (step.write_rows) step.write_rows(p.step);
      bar.update(epoch_steps, format_losses(step.losses));
      if (!step.current) return;    // the models are steps ahead: no checkpoint here
      periodic.after_step(p.step);  // after the step's metrics rows: a checkpoint has them all
      if (InterruptGuard::interrupted() || p.step == loop.stop_after_step) {
        bar.finish();
        save();
        fail_interrupted(p.step, o.checkpoint ? loop.checkpoint_path : "");
      }
    });
    bar.finish();
    current_bar = nullptr;
    const double seconds = seconds_since(epoch_start);
    for (size_t b = 0; b < B; ++b)
      p.last_train_loss[b] =
          p.epoch_loss[b] / static_cast<double>(std::max<int64_t>(1, epoch_steps));
    array.end_epoch(epoch, p, epoch_steps - resumed_steps, seconds);
    std::fflush(stdout);
    std::fill(p.epoch_loss.begin(), p.epoch_loss.end(), 0.0);
    p.epochs_done = epoch + 1;
    p.batch_in_epoch = 0;
    save();
  }
  periodic.wait();  // an error of the last background write fails the run
  if (!trained) fmt::print("{}: already trained for {} epochs\n", loop.who, o.epochs);
  periodic.inspect_now([&](const Checkpoint& state) { p.state_crc32 = model_state_crc32s(state); });
  array.finish(p, trained, seconds_since(start), results);
}

}  // namespace hfta
