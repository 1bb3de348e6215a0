// Random flags for every subcommand: each `hfta` run either succeeds or fails with exactly one
// stderr line starting "hfta: error:" and a non-zero exit status; it never crashes (a signal),
// never hangs (a per-run time limit) and never prints a second error line.
//
// Each case starts from a command that succeeds quickly on tiny generated data (the subcommand's
// base below) and replaces or adds one to three flags, taken from the subcommand's own --help,
// with hostile values: negative, zero, huge, not a number, NaN, empty, lists with holes, missing
// files, a directory, a file of random bytes, a truncated checkpoint. "Huge" means beyond what the
// flag's type holds: a valid but huge count (--steps 2147483648) is work the user asked for,
// which runs as long as it takes, and a size too big for the machine is refused by the memory
// checks (the fuzzing found two that were not: --synthetic-size, which ended in std::bad_alloc,
// and --num-samples, which the OOM killer ended). HFTA_FUZZ_SEED picks the
// first seed, HFTA_FUZZ_CASES the number of cases per subcommand; every failure prints the seed
// and the command line, which reproduce it alone.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "io/shell_quote.h"
#include "test_files.h"

namespace hfta {
namespace {

using test::TempDir;

struct Outcome {
  int status = 0;  // as std::system returns it
  std::string out, err;
};

// Runs `hfta <args>` under a time limit of `seconds` (coreutils timeout: exit 124 on a hang).
Outcome run_limited(const std::string& args, const TempDir& tmp, int seconds) {
  const std::string out = tmp.str() + "/stdout.txt", err = tmp.str() + "/stderr.txt";
  // In the test's folder: a value taken as a relative path (--out abc) lands there.
  const std::string cmd = fmt::format("cd {} && timeout -k 5 {} {} {} > {} 2> {} < /dev/null",
                                      tmp.str(), seconds, HFTA_CLI_PATH, args, out, err);
  const int status = std::system(cmd.c_str());
  return {status, test::read_file(out), test::read_file(err)};
}

// The long flags of `hfta <command> --help`.
std::vector<std::string> flags_of(const std::string& command, const TempDir& tmp) {
  const Outcome help = run_limited(command + " --help", tmp, 30);
  std::vector<std::string> flags;
  const std::regex flag(R"(^\s+(?:-\w,)?(--[a-z0-9][a-z0-9-]*))");
  std::smatch m;
  std::string line;
  for (std::istringstream in(help.out); std::getline(in, line);)
    if (std::regex_search(line, m, flag) && m[1] != "--help") flags.push_back(m[1]);
  return flags;
}

struct Subcommand {
  std::string name;
  std::string base;  // succeeds in about a second on generated data
};

class CliFuzz : public testing::TestWithParam<Subcommand> {};

TEST_P(CliFuzz, EveryRunSucceedsOrFailsInOneErrorLine) {
  const Subcommand& sub = GetParam();
  TempDir tmp("cli_fuzz_" + sub.name);
  // Files the values can name: a run to eval, extract and export, random bytes, a cut checkpoint.
  const std::string run = tmp.str() + "/run";
  const Outcome trained = run_limited(
      fmt::format("train --model mlp --dataset synthetic --synthetic-size 64 "
                  "--synthetic-test-size 32 --batch-size 16 --lr 0.001,0.01 --epochs 1 --out {}",
                  run),
      tmp, 120);
  ASSERT_EQ(trained.status, 0) << trained.err;
  const std::string noise = tmp.str() + "/noise.bin", cut = tmp.str() + "/cut.bin";
  {
    std::mt19937_64 bytes(7);
    std::ofstream f(noise, std::ios::binary);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>(bytes()));
    const std::string whole = test::read_file(run + "/checkpoint.bin");
    std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() / 2);
  }
  std::string base = sub.base;
  auto substitute = [](std::string& text, const std::string& from, const std::string& to) {
    for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, from.size(), to);
  };
  substitute(base, "RUN", run);
  substitute(base, "SPACE", tmp.str() + "/space.json");  // OUT: one per case, below
  std::ofstream(tmp.str() + "/space.json")
      << R"({"lr": {"dist": "loguniform", "low": 1e-4, "high": 1e-1}})";

  const std::vector<std::string> flags = flags_of(sub.name, tmp);
  ASSERT_GE(flags.size(), 3u) << sub.name << " --help lists too few flags";
  const std::vector<std::string> values = {"-1",
                                           "0",
                                           "1",
                                           "3",
                                           "-0.5",
                                           "1e309",
                                           "nan",
                                           "inf",
                                           "99999999999999999999",
                                           "abc",
                                           "",
                                           " ",
                                           "1,,2",
                                           ",",
                                           "0.1,-0.1",
                                           "1,2,3,4,5,6,7,8,9",
                                           "/nonexistent/x",
                                           tmp.str(),
                                           noise,
                                           cut,
                                           run + "/checkpoint.bin",
                                           "--",
                                           "a b",
                                           "'",
                                           "\xF0\x9F\x92\xA5"};
  const int cases = std::getenv("HFTA_FUZZ_CASES") ? std::atoi(std::getenv("HFTA_FUZZ_CASES")) : 16;
  const uint64_t first =
      std::getenv("HFTA_FUZZ_SEED") ? std::strtoull(std::getenv("HFTA_FUZZ_SEED"), nullptr, 10) : 1;
  for (uint64_t seed = first; seed < first + static_cast<uint64_t>(cases); ++seed) {
    std::mt19937_64 rng(seed);
    // The command as words: a flag given in the base loses its value there, then comes at the
    // end with a hostile one (or none); each word is quoted for the shell.
    std::vector<std::string> words = {sub.name};
    std::istringstream base_words(base);
    for (std::string w; base_words >> w;)
      words.push_back(w == "OUT" ? fmt::format("{}/out{}", tmp.str(), seed) : w);
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::string& flag = flags[rng() % flags.size()];
      for (size_t i = 1; i < words.size(); ++i)
        if (words[i] == flag) {
          const bool valued = i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0;
          words.erase(words.begin() + static_cast<long>(i),
                      words.begin() + static_cast<long>(i + (valued ? 2 : 1)));
          break;
        }
      words.push_back(flag);
      if (rng() % 8 != 0) words.push_back(values[rng() % values.size()]);
    }
    std::string args;
    for (const std::string& w : words) args += (args.empty() ? "" : " ") + quote_arg(w);
    SCOPED_TRACE(fmt::format("HFTA_FUZZ_SEED={} HFTA_FUZZ_CASES=1: hfta {}", seed, args));
    const Outcome r = run_limited(args, tmp, 60);
    ASSERT_FALSE(WIFSIGNALED(r.status)) << "killed by signal " << WTERMSIG(r.status) << "\n"
                                        << r.err;
    ASSERT_TRUE(WIFEXITED(r.status));
    const int code = WEXITSTATUS(r.status);
    ASSERT_NE(code, 124) << "no answer within 60 s";
    EXPECT_LT(code, 128) << "died of signal " << code - 128 << ":\n" << r.err;
    if (code == 0) continue;
    size_t error_lines = 0;
    std::string line, last;
    for (std::istringstream in(r.err); std::getline(in, line);) {
      if (line.rfind("hfta: error: ", 0) == 0) ++error_lines;
      if (!line.empty()) last = line;
    }
    EXPECT_EQ(error_lines, 1u) << "exit " << code << ", stderr:\n" << r.err;
    // Warnings may come before the error; the error is the last line.
    EXPECT_EQ(last.rfind("hfta: error: ", 0), 0u) << "stderr:\n" << r.err;
  }
}

// The bases: tiny runs that succeed, so that a failure comes from the changed flags.
INSTANTIATE_TEST_SUITE_P(
    Subcommands, CliFuzz,
    testing::Values(
        Subcommand{"train",
                   "--model mlp --dataset synthetic --synthetic-size 64 --synthetic-test-size 32 "
                   "--batch-size 16 --lr 0.001,0.01 --epochs 1 --iters-per-epoch 2 --plan fused "
                   "--out OUT"},
        Subcommand{"eval", "--checkpoint RUN/checkpoint.bin"},
        Subcommand{"extract", "--run RUN --model 1 --out OUT.bin"},
        Subcommand{"export", "--run RUN --model 1 --out OUT.safetensors"},
        Subcommand{"trial", "--model mlp --B 2 --batch-size 16 --steps 1 --warmup 0 --plan fused"},
        // --quiet-wait 0: on a loaded machine a sweep otherwise waits up to 120 s for other
        // processes to leave the CPUs, past the 60 s a case may take.
        Subcommand{"sweep",
                   "--model mlp --dataset synthetic --modes fused --B 1 --repeats 1 --steps 1 "
                   "--warmup 0 --batch-size 16 --quiet-wait 0 --out OUT"},
        Subcommand{"tune",
                   "--model mlp --dataset synthetic --synthetic-size 64 --synthetic-test-size 32 "
                   "--space SPACE --algorithm random --num-samples 2 --max-iters 1 "
                   "--iters-per-epoch 1 --batch-size 16 --out OUT"}),
    [](const testing::TestParamInfo<Subcommand>& info) { return info.param.name; });

}  // namespace
}  // namespace hfta
