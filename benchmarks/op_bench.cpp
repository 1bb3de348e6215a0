// op_bench: times any fused op (forward + backward, or one optimizer step) at any B.
//
//   op_bench [--threads T] [--min-ms M] <op> B=1,2,4,8 key=value ...
//   op_bench --problems benchmarks/problems.txt        (one problem per line, benchdnn style)
//
// Each line reports: ms per call, GFLOP/s, percent of this machine's measured sgemm peak, for
// memory-bound ops also GB/s of minimum traffic (see bench_cases.h) and its percent of the
// measured memory bandwidth, and fused(B) / (B x single-model time) where the single-model time
// is the same op at B=1 in this run, followed by the exact command that reproduces the line.
// Problem files hold one `<op> key=value ...` per line; '#' starts a comment, blank lines are
// skipped.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/peak.h"
#include "backend/cpu/runtime.h"
#include "bench_cases.h"
#include "core/error.h"

namespace hfta::bench {
namespace {

double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

// Appends timings of `run` (at least 3, for about budget_ms) to samples.
void sample_ms(const std::function<void()>& run, double budget_ms, std::vector<double>& samples) {
  const double start = now_ms();
  for (int n = 0; n < 3 || (now_ms() - start < budget_ms && n < 100); ++n) {
    const double t0 = now_ms();
    run();
    samples.push_back(now_ms() - t0);
  }
}

double minimum(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// How many threads' worth of work this machine does at once right now: the same dependent-FMA
// loop on every thread against one thread alone. On a shared machine (another tenant's build on
// the same cores) this drops towards 1, and every multi-threaded timing below with it.
double thread_scaling(int threads) {
  auto spin = [](int64_t n) {
    float a = 1.0f, b = 0.5f, c = 0.25f, d = 0.125f;
    for (int64_t i = 0; i < n; ++i) {
      a = a * 0.9999f + 1e-4f, b = b * 0.9999f + 1e-4f, c = c * 0.9999f + 1e-4f;
      d = d * 0.9999f + 1e-4f;
      asm volatile("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d));
    }
    return a + b + c + d;
  };
  const int64_t n = 20'000'000;
  std::vector<float> out(threads);
  double t0 = now_ms();
  out[0] = spin(n);
  const double one = now_ms() - t0;
  t0 = now_ms();
  parallel_for(threads, [&](int64_t t) { out[t] = spin(n); });
  const double all = now_ms() - t0;
  return threads * one / all;
}

// Memory bandwidth in GB/s with all threads: a = s * a + b over two 128 MiB arrays (far beyond
// the last-level cache), 12 bytes moved per element: the access pattern of an optimizer step.
double measure_bandwidth_gbs() {
  constexpr int64_t kChunk = 1 << 14;
  const int64_t n = int64_t{32} << 20;
  std::vector<float> a(n), b(n);
  parallel_for(n / kChunk, [&](int64_t c) {  // first touch by the threads that use the pages
    std::fill_n(a.data() + c * kChunk, kChunk, 1.0f);
    std::fill_n(b.data() + c * kChunk, kChunk, 0.5f);
  });
  auto run = [&] {
    parallel_for(n / kChunk, [&](int64_t c) {
      float* __restrict pa = a.data() + c * kChunk;
      const float* __restrict pb = b.data() + c * kChunk;
      for (int64_t i = 0; i < kChunk; ++i) pa[i] = 0.999f * pa[i] + pb[i];
    });
  };
  run();
  std::vector<double> samples;
  sample_ms(run, 300.0, samples);
  return 12.0 * static_cast<double>(n) / (minimum(samples) * 1e6);
}

std::string g_program = "./build/op_bench";  // argv[0], for the reproducer commands

struct Problem {
  std::string op;
  std::vector<int64_t> model_counts = {1, 2, 4, 8};
  Options options;
};

Problem parse_problem(const std::vector<std::string>& words) {
  HFTA_CHECK(!words.empty(), "no op given: try `op_bench linear B=1,8 N=64 in=784 out=256`");
  Problem p;
  p.op = words[0];
  for (size_t i = 1; i < words.size(); ++i) {
    auto eq = words[i].find('=');
    HFTA_CHECK(eq != std::string::npos, "argument '{}' is not key=value", words[i]);
    std::string key = words[i].substr(0, eq), value = words[i].substr(eq + 1);
    if (key == "B") {
      p.model_counts.clear();
      std::stringstream ss(value);
      for (std::string item; std::getline(ss, item, ',');) {
        int64_t b = std::stoll(item);
        HFTA_CHECK(b > 0, "B values must be positive, got {}", item);
        p.model_counts.push_back(b);
      }
    } else {
      p.options[key] = value;
    }
  }
  return p;
}

std::string repro(const Problem& p, int64_t B, int threads) {
  std::string cmd = fmt::format("{} --threads {} {} B={}", g_program, threads, p.op, B);
  for (const auto& [k, v] : p.options) cmd += fmt::format(" {}={}", k, v);
  return cmd;
}

// Times the fused op at each B against the single-model op, interleaved in rounds so that a
// change in machine load hits both. On a shared machine contention only ever adds time, so the
// figures are the minimum over the samples (the median is printed too, for the spread); the
// ratio divides the minima.
void run_problem(const Problem& p, double peak, double bandwidth, int threads, double min_ms) {
  // The serial baseline is our best B=1 path: the op's own parallelism rule, whatever par= says.
  Options baseline = p.options;
  baseline["par"] = "auto";
  OpCase one = make_case(p.op, 1, baseline);
  constexpr int kRounds = 3;
  for (int64_t B : p.model_counts) {
    // B=1 under the baseline's knobs is the baseline itself: time it once (two copies would
    // also evict each other's data from the cache between rounds).
    const bool is_baseline = B == 1 && get_option(p.options, "par", "auto") == "auto";
    OpCase c = is_baseline ? one : make_case(p.op, B, p.options);
    std::vector<double> fused, single;
    one.run();  // warm-up: primitive creation, first-touch of buffers
    c.run();
    for (int r = 0; r < kRounds; ++r) {
      if (!is_baseline) sample_ms(one.run, min_ms / kRounds / 2, single);
      sample_ms(c.run, min_ms / kRounds, fused);
    }
    const double ms = minimum(fused), single_ms = is_baseline ? ms : minimum(single);
    // Checked right after the timings: a value well below `threads` flags a line measured while
    // another process had the cores.
    const std::string scaling =
        threads > 1 ? fmt::format("  scaling={:.2f}", thread_scaling(threads)) : std::string();
    const double gflops = c.flops / (ms * 1e6);
    std::string traffic = c.bytes > 0.0
                              ? fmt::format("{:7.1f} GB/s {:5.1f}% of DRAM", c.bytes / (ms * 1e6),
                                            100.0 * c.bytes / (ms * 1e6) / bandwidth)
                              : std::string(25, ' ');
    fmt::print(
        "{:<11} B={:<3} {:<44} {:9.3f} ms (median {:8.3f}) {:8.2f} GFLOP/s {:5.1f}% of "
        "peak {}  fused/(B x single)={:.3f}{}   # {}\n",
        p.op, B, c.description, ms, median(fused), gflops, 100.0 * gflops / peak, traffic,
        ms / (B * single_ms), scaling, repro(p, B, threads));
    std::fflush(stdout);
  }
}

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::stringstream ss(line);
  for (std::string w; ss >> w;) words.push_back(w);
  return words;
}

int main_impl(int argc, char** argv) {
  int threads = 0;
  double min_ms = 200.0;
  std::string problems_file;
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&] {
      HFTA_CHECK(i + 1 < argc, "{} needs a value", a);
      return std::string(argv[++i]);
    };
    if (a == "--threads")
      threads = std::stoi(value());
    else if (a == "--min-ms")
      min_ms = std::stod(value());
    else if (a == "--problems")
      problems_file = value();
    else if (a == "--help" || a == "-h") {
      fmt::print(
          "usage: op_bench [--threads T] [--min-ms M] <op> B=1,2,4,8 key=value ...\n"
          "       op_bench [--threads T] --problems FILE\nops: {}\n",
          fmt::join(case_names(), ", "));
      return 0;
    } else
      words.push_back(a);
  }
  cpu::init_runtime(argv, threads);
  threads = num_threads_in_use();
  fmt::print("# {}\n", cpu::describe_runtime());
  g_program = argv[0];
  const double openblas_peak = cpu::measure_peak_gflops();
  // The peak is the faster of the two sgemms: OpenBLAS's kernels follow OPENBLAS_CORETYPE (its
  // AVX2 "Haswell" kernels reach about half of what AVX-512 ones do), while oneDNN's JIT always
  // uses the widest ISA the CPU has.
  const double onednn_peak = cpu::measure_onednn_sgemm_gflops(cpu::PeakStatistic::kFastest);
  const double peak = std::max(openblas_peak, onednn_peak), bandwidth = measure_bandwidth_gbs();
  fmt::print(
      "# measured peak (sgemm 2048^3, best of OpenBLAS {:.1f} and oneDNN {:.1f}): {:.1f} "
      "GFLOP/s with {} threads\n",
      openblas_peak, onednn_peak, peak, threads);
  fmt::print("# measured memory bandwidth (a = s*a + b, 2 x 128 MiB): {:.1f} GB/s\n", bandwidth);
  if (threads > 1)
    fmt::print(
        "# thread scaling now: {} threads do {:.2f}x the work of one (below {} means "
        "another process shares the cores: multi-threaded timings are inflated)\n",
        threads, thread_scaling(threads), threads);
  if (!problems_file.empty()) {
    std::ifstream in(problems_file);
    HFTA_CHECK(in.good(), "cannot open problem file {}", problems_file);
    for (std::string line; std::getline(in, line);) {
      auto words_in_line = split_words(line.substr(0, line.find('#')));
      if (!words_in_line.empty())
        run_problem(parse_problem(words_in_line), peak, bandwidth, threads, min_ms);
    }
  } else {
    run_problem(parse_problem(words), peak, bandwidth, threads, min_ms);
  }
  return 0;
}

}  // namespace
}  // namespace hfta::bench

int main(int argc, char** argv) {
  try {
    return hfta::bench::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "op_bench: " << e.what() << "\n";
    return 1;
  }
}
