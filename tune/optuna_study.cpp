#include "tune/optuna_study.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "io/shell_quote.h"
#include "tune/optuna_study_script.h"

namespace hfta {

namespace {

// Runs `command` in a shell, its stdout and stderr together into `output`; returns its status.
int run_capturing(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  HFTA_CHECK(pipe != nullptr, "cannot run `{}`", command);
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  return pclose(pipe);
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

std::string optuna_python() {
  if (const char* p = std::getenv("HFTA_PYTHON"); p != nullptr && *p != '\0') return p;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

void check_optuna_available() {
  std::string output;
  const int status = run_capturing(quote_arg(optuna_python()) + " -c 'import optuna'", output);
  HFTA_CHECK(status == 0,
             "--optuna writes the study through Optuna, which {} cannot import ({}): run "
             "`apt-get install python3-optuna`, or name a python3 that has it in HFTA_PYTHON",
             optuna_python(), last_line(output));
}

void write_optuna_study(const std::string& run_dir, const std::string& storage,
                        const std::string& study, bool quiet) {
  const std::string script = run_dir + "/optuna_study.py";
  {
    std::ofstream out(script, std::ios::trunc);
    out << kOptunaStudyScript;
    HFTA_CHECK(out.good(), "cannot write {}", script);
  }
  std::string command = fmt::format("{} {} --run {} --storage {}", quote_arg(optuna_python()),
                                    quote_arg(script), quote_arg(run_dir), quote_arg(storage));
  if (!study.empty()) command += " --study " + quote_arg(study);
  std::string output;
  const int status = run_capturing(command, output);
  HFTA_CHECK(status == 0, "--optuna {}: writing the study failed: {} (run `{}` to see all)",
             storage, last_line(output), command);
  if (!quiet) fmt::print("{}\n", last_line(output));
}

}  // namespace hfta
