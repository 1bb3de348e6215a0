// Ctrl-C for the workflows: while an InterruptGuard lives, SIGINT and SIGTERM only set a flag
// that the work polls (`hfta train` finishes its step, saves a checkpoint and stops; `hfta sweep`
// kills its children and keeps the rows so far), and SIGPIPE is ignored (a sweep's child that died
// before its "go" line must not kill the sweep). The previous handlers come back on destruction.
// Guards nest: only the outermost installs and restores the handlers.
#pragma once

#include <cstdint>
#include <string>

namespace hfta {

class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  // True once SIGINT or SIGTERM arrived while a guard lived (reset when the outermost guard
  // starts or ends).
  static bool interrupted();
};

// Throws hfta::Error for a training interrupted after optimizer step `step`, saying where its
// checkpoint is when one was saved (`checkpoint_path`; empty: none) and how to continue.
[[noreturn]] void fail_interrupted(int64_t step, const std::string& checkpoint_path);

}  // namespace hfta
