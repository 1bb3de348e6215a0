#include "io/interrupt.h"

#include <fmt/format.h>
#include <signal.h>

#include "core/error.h"

namespace hfta {

namespace {
volatile sig_atomic_t g_interrupted = 0;
struct sigaction g_old_int, g_old_term, g_old_pipe;
// Guards nest (`hfta tune` runs `hfta train`'s loop, which has its own): only the outermost
// installs and restores the handlers and clears the flag, so an inner guard neither hides a
// Ctrl-C from the outer work nor leaves our handler behind.
int g_depth = 0;
void on_interrupt(int) { g_interrupted = 1; }
}  // namespace

InterruptGuard::InterruptGuard() {
  if (g_depth++ > 0) return;
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked poll() returns at once
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &g_old_pipe);
}

InterruptGuard::~InterruptGuard() {
  if (--g_depth > 0) return;
  g_interrupted = 0;  // a later run without a guard must not see this one's Ctrl-C
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGPIPE, &g_old_pipe, nullptr);
}

bool InterruptGuard::interrupted() { return g_interrupted != 0; }

void fail_interrupted(int64_t step, const std::string& checkpoint_path) {
  fail("interrupted after step {}{}", step,
       checkpoint_path.empty()
           ? ""
           : fmt::format("; checkpoint saved in {}: run the same command with --resume to continue",
                         checkpoint_path));
}

}  // namespace hfta
