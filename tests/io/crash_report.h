// What a replay of hostile inputs prints when a read kills the process (a crash, a sanitizer
// report, an abort, or a hang caught by alarm()): the input being read, which a test framework
// cannot print from there. Shared by tests/io/hostile_bytes.h and fuzz/replay_main.cpp.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstring>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HFTA_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(HFTA_SANITIZER_ADDRESS)
#define HFTA_TEST_ASAN 1
#endif
#ifdef HFTA_TEST_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace hfta::hostile {

// The input being read, set before each read.
inline char g_current[512] = "nothing";

inline void print_current() {
  const char head[] = "\nhostile bytes: the process died while reading ";
  [[maybe_unused]] ssize_t n = ::write(2, head, sizeof head - 1);
  n = ::write(2, g_current, std::strlen(g_current));
  n = ::write(2, "\n", 1);
}

inline void die_printing_current(int sig) {
  print_current();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Installed once: ASan keeps its own SEGV report and calls back; otherwise plain handlers.
inline void install_crash_report() {
  static bool installed = false;
  if (installed) return;
  installed = true;
#ifdef HFTA_TEST_ASAN
  __sanitizer_set_death_callback(print_current);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, die_printing_current);
#endif
  ::signal(SIGALRM, die_printing_current);  // a read that hangs
}

}  // namespace hfta::hostile
