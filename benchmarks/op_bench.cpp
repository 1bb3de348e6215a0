// op_bench: times any fused op (forward + backward, or one optimizer step) at any B.
//
//   op_bench [--threads T] [--min-ms M] <op> B=1,2,4,8 key=value ...
//   op_bench --problems benchmarks/problems.txt        (one problem per line, benchdnn style)
//
// Each line reports: ms per call, GFLOP/s, percent of this machine's measured sgemm peak, and
// fused(B) / (B x single-model time) where the single-model time is the same op at B=1 in this
// run, followed by the exact command that reproduces the line.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/runtime.h"
#include "bench_cases.h"
#include "core/error.h"

namespace hfta::bench {
namespace {

double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

// Median of repeated timings, each repeat long enough to dwarf timer resolution.
double time_ms(const std::function<void()>& run, double min_ms) {
  run();  // warm-up: primitive creation, first-touch of buffers
  std::vector<double> samples;
  double start_all = now_ms();
  while (samples.size() < 5 || (now_ms() - start_all < min_ms && samples.size() < 200)) {
    double t0 = now_ms();
    run();
    samples.push_back(now_ms() - t0);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

// Peak fp32 GFLOP/s of this machine, measured with a large OpenBLAS sgemm.
double measure_peak_gflops() {
  const int64_t n = 2048;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
  double ms = time_ms([&] { cpu::openblas_sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                                       c.data(), n); },
                      300.0);
  return 2.0 * n * n * n / (ms * 1e6);
}

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
  std::string cmd = fmt::format("./build/op_bench --threads {} {} B={}", threads, p.op, B);
  for (const auto& [k, v] : p.options) cmd += fmt::format(" {}={}", k, v);
  return cmd;
}

void run_problem(const Problem& p, double peak, int threads, double min_ms) {
  // The serial baseline is our best B=1 path: the op's own parallelism rule, whatever par= says.
  double single_ms = 0.0;
  {
    Options baseline = p.options;
    baseline["par"] = "auto";
    OpCase one = make_case(p.op, 1, baseline);
    single_ms = time_ms(one.run, min_ms);
  }
  for (int64_t B : p.model_counts) {
    OpCase c = make_case(p.op, B, p.options);
    double ms = time_ms(c.run, min_ms);
    double gflops = c.flops / (ms * 1e6);
    fmt::print("{:<10} B={:<3} {:<40} {:9.3f} ms {:8.2f} GFLOP/s {:5.1f}% of peak  "
               "fused/(B x single)={:.3f}   # {}\n",
               p.op, B, c.description, ms, gflops, 100.0 * gflops / peak, ms / (B * single_ms),
               repro(p, B, threads));
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
    if (a == "--threads") threads = std::stoi(value());
    else if (a == "--min-ms") min_ms = std::stod(value());
    else if (a == "--problems") problems_file = value();
    else if (a == "--help" || a == "-h") {
      fmt::print("usage: op_bench [--threads T] [--min-ms M] <op> B=1,2,4,8 key=value ...\n"
                 "       op_bench [--threads T] --problems FILE\nops: {}\n",
                 fmt::join(case_names(), ", "));
      return 0;
    } else words.push_back(a);
  }
  cpu::init_runtime(argv, threads);
  threads = num_threads_in_use();
  fmt::print("# {}\n", cpu::describe_runtime());
  double peak = measure_peak_gflops();
  fmt::print("# measured peak (sgemm 2048^3): {:.1f} GFLOP/s with {} threads\n", peak, threads);
  if (!problems_file.empty()) {
    std::ifstream in(problems_file);
    HFTA_CHECK(in.good(), "cannot open problem file {}", problems_file);
    for (std::string line; std::getline(in, line);) {
      auto words_in_line = split_words(line.substr(0, line.find('#')));
      if (!words_in_line.empty()) run_problem(parse_problem(words_in_line), peak, threads, min_ms);
    }
  } else {
    run_problem(parse_problem(words), peak, threads, min_ms);
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
