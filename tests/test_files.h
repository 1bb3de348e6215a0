// Files and commands for tests: a scoped temporary directory, reading a whole file, and running
// the `hfta` binary (HFTA_CLI_PATH, which CMake defines for every test).
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace hfta::test {

// A fresh directory under the system's temporary directory (its name holds the process id, so
// tests running side by side never share one), removed when the test ends.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             fmt::format("hfta_test_{}_{}", getpid(), name)) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string str() const { return path.string(); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// The whole file, byte for byte; empty when it cannot be read.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What `hfta <args>` printed and how it ended.
struct CommandResult {
  int exit_code = -1;  // -1 when it did not exit normally
  std::string out, err;
  std::string output() const { return out + err; }
  // Lines on stderr (a failure prints exactly one).
  int64_t error_lines() const { return std::count(err.begin(), err.end(), '\n'); }
};

// Runs `hfta <args>` (`args` as shell words) and waits for it.
inline CommandResult run_hfta(const std::string& args) {
  static int calls = 0;
  TempDir tmp(fmt::format("run_hfta_{}", calls++));
  const auto out = tmp.path / "stdout.txt", err = tmp.path / "stderr.txt";
  const std::string cmd =
      fmt::format("{} {} > {} 2> {}", HFTA_CLI_PATH, args, out.string(), err.string());
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

// Starts `hfta <args>` (`args` as whitespace-separated words) without waiting for it, stdout and
// stderr into `out_file` (/dev/null when empty); returns its pid, or -1 when it cannot start.
inline pid_t spawn_hfta(const std::string& args, const std::filesystem::path& out_file = {}) {
  std::vector<std::string> words = {HFTA_CLI_PATH};
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const std::string out = out_file.empty() ? "/dev/null" : out_file.string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, HFTA_CLI_PATH, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Runs `hfta <args>`, expecting it to fail as every failure must: a non-zero exit status and one
// line on stderr, mentioning `message`.
inline void expect_hfta_error(const std::string& args, const std::string& message) {
  CommandResult r = run_hfta(args);
  EXPECT_NE(r.exit_code, 0) << args;
  EXPECT_NE(r.err.find(message), std::string::npos)
      << args << " should mention '" << message << "', printed: " << r.output();
  EXPECT_EQ(r.error_lines(), 1) << args << " printed: " << r.err;
}

}  // namespace hfta::test
