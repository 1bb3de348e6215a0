#include "sweep/sweep_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "core/error.h"

extern char** environ;

namespace hfta {

std::string format_trial_report(const TrialReport& r) {
  return fmt::format(
      "{} seconds={:.17g} samples_per_second={:.17g} step_ms={:.17g} flops_per_step={:.17g} "
      "params_per_model={} end_ns={} peak_rss_bytes={} plan={}",
      kTrialResultPrefix, r.result.seconds, r.result.samples_per_second, r.result.step_ms,
      r.result.flops_per_step, r.result.params_per_model, r.end_ns, r.peak_rss_bytes,
      r.result.plan.empty() ? "fused" : r.result.plan);
}

std::optional<TrialReport> parse_trial_report(const std::string& output) {
  std::stringstream lines(output);
  const std::string prefix = std::string(kTrialResultPrefix) + " ";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::map<std::string, std::string> fields;
    std::stringstream words(line.substr(prefix.size()));
    for (std::string word; words >> word;) {
      auto eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    bool ok = true;
    auto number = [&](const char* key) {
      auto it = fields.find(key);
      if (it == fields.end()) return ok = false, 0.0;
      char* end = nullptr;
      double v = std::strtod(it->second.c_str(), &end);
      if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v)) ok = false;
      return v;
    };
    TrialReport r;
    r.result.seconds = number("seconds");
    r.result.samples_per_second = number("samples_per_second");
    r.result.step_ms = number("step_ms");
    r.result.flops_per_step = number("flops_per_step");
    r.result.params_per_model = static_cast<int64_t>(number("params_per_model"));
    r.end_ns = static_cast<int64_t>(number("end_ns"));
    r.peak_rss_bytes = static_cast<int64_t>(number("peak_rss_bytes"));
    r.result.plan = fields.count("plan") ? fields["plan"] : "fused";
    if (ok && r.result.seconds > 0) return r;
  }
  return std::nullopt;
}

std::vector<std::string> trial_arguments(const TrialOptions& o, bool wait_for_go) {
  std::vector<std::string> args = {"trial", "--model", o.model, "--dataset", o.dataset};
  if (!o.data_dir.empty()) args.insert(args.end(), {"--data-dir", o.data_dir});
  if (o.npoints > 0) args.insert(args.end(), {"--npoints", std::to_string(o.npoints)});
  args.insert(args.end(), {"--B", std::to_string(o.B)});
  if (o.serial) args.push_back("--serial");
  args.insert(args.end(),
              {"--batch-size", std::to_string(o.batch_size), "--warmup",
               std::to_string(o.warmup_steps), "--steps", std::to_string(o.steps), "--seed",
               std::to_string(o.seed), "--threads", std::to_string(o.threads), "--plan", o.plan});
  if (o.deterministic) args.push_back("--deterministic");
  if (o.device != TrialOptions{}.device) args.insert(args.end(), {"--device", o.device});
  if (o.image_size > 0) args.insert(args.end(), {"--image-size", std::to_string(o.image_size)});
  if (!o.text_files.empty()) args.insert(args.end(), {"--text-files", o.text_files});
  if (o.vocab != TrialOptions{}.vocab)
    args.insert(args.end(), {"--vocab", std::to_string(o.vocab)});
  if (wait_for_go) args.push_back("--wait-for-go");
  return args;
}

Measurement combine_reports(const std::vector<TrialReport>& reports, int64_t steps) {
  HFTA_CHECK(!reports.empty() && steps >= 1, "combine_reports needs reports and steps >= 1");
  double first_start = std::numeric_limits<double>::infinity(), last_start = -first_start;
  double first_end = first_start, last_end = -first_start;
  double samples = 0, flops = 0;
  Measurement m;
  for (const TrialReport& r : reports) {
    const double end = r.end_ns * 1e-9, start = end - r.result.seconds;
    first_start = std::min(first_start, start), last_start = std::max(last_start, start);
    first_end = std::min(first_end, end), last_end = std::max(last_end, end);
    samples += r.result.samples_per_second * r.result.seconds;
    flops += r.result.flops_per_step * static_cast<double>(steps);
    m.peak_rss_bytes += r.peak_rss_bytes;
    m.plan = r.result.plan;
  }
  const double window = last_end - first_start;
  m.ok = window > 0;
  if (!m.ok) {
    m.error = "the processes reported an empty timed window";
    return m;
  }
  m.samples_per_second = samples / window;
  m.step_ms = window / static_cast<double>(steps) * 1e3;
  m.gflops = flops / window * 1e-9;
  m.window_overlap = std::max(0.0, first_end - last_start) / window;
  return m;
}

// ---- children ----

namespace {

struct Child {
  pid_t pid = -1;
  int in_fd = -1, out_fd = -1, err_fd = -1;  // parent's ends
  std::string out, err, command;
  bool exited = false, ready = false;
  int status = 0;
  int64_t max_rss = 0;
  double cpu_seconds = 0;  // user + system, all threads, from wait4
};

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Reads what is available (non-blocking); closes the fd at end of file.
void drain(int& fd, std::string& into) {
  char buffer[4096];
  while (fd >= 0) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      into.append(buffer, static_cast<size_t>(n));
      if (into.size() > (1u << 20)) into.erase(0, into.size() - (1u << 19));  // keep the tail
    } else if (n == 0) {
      close_fd(fd);
    } else if (errno != EINTR) {
      if (errno != EAGAIN) close_fd(fd);
      return;
    }
  }
}

int64_t current_rss_bytes(pid_t pid) {
  std::ifstream statm(fmt::format("/proc/{}/statm", pid));
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

// `environ` plus `extra` ("NAME=value" entries), for posix_spawn.
std::vector<char*> environment_with(const std::vector<std::string>& extra) {
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (const std::string& x : extra) env.push_back(const_cast<char*>(x.c_str()));
  env.push_back(nullptr);
  return env;
}

void spawn(const std::string& exe, const std::vector<std::string>& args, bool barrier,
           const std::vector<std::string>& extra_env, Child& c) {
  int in[2] = {-1, -1}, out[2], err[2];
  if ((barrier && pipe2(in, O_CLOEXEC) != 0) || pipe2(out, O_CLOEXEC) != 0 ||
      pipe2(err, O_CLOEXEC) != 0)
    fail("cannot create pipes for a trial process: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (barrier)
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  else
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> env = environment_with(extra_env);
  int rc = posix_spawn(&c.pid, exe.c_str(), &actions, &attr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (barrier) close(in[0]);
  close(out[1]);
  close(err[1]);
  c.in_fd = in[1], c.out_fd = out[0], c.err_fd = err[0];
  for (int fd : {c.out_fd, c.err_fd}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (rc != 0) {
    c.pid = -1;
    close_fd(c.in_fd), close_fd(c.out_fd), close_fd(c.err_fd);
    fail("cannot start {}: {}", exe, std::strerror(rc));
  }
}

bool reap(Child& c, bool block) {
  if (c.exited || c.pid < 0) return c.exited;
  int status = 0;
  rusage usage{};
  pid_t r;
  do r = wait4(c.pid, &status, block ? 0 : WNOHANG, &usage);
  while (r < 0 && errno == EINTR);
  if (r == c.pid) {
    c.exited = true, c.status = status;
    c.cpu_seconds = cpu_seconds(usage);
  }
  return c.exited;
}

void kill_all(std::vector<Child>& children) {
  for (Child& c : children)
    if (c.pid > 0 && !c.exited) kill(c.pid, SIGKILL);
  for (Child& c : children) reap(c, true);
}

std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  std::string line = text.substr(begin, end - begin + 1);
  return line.size() > 400 ? line.substr(0, 400) + "..." : line;
}

std::string describe_exit(const Child& c) {
  std::string why;
  if (WIFSIGNALED(c.status)) {
    int sig = WTERMSIG(c.status);
    const char* abbrev = sigabbrev_np(sig);
    why = fmt::format("killed by signal {} (SIG{})", sig, abbrev ? abbrev : "?");
    if (sig == SIGKILL) why += ", out of memory?";
  } else if (WIFEXITED(c.status) && WEXITSTATUS(c.status) != 0) {
    why = fmt::format("exit status {}", WEXITSTATUS(c.status));
  } else {
    why = "exited without a result line";
  }
  std::string tail = last_line(c.err);
  return tail.empty() ? why : fmt::format("{}: {}", why, tail);
}

bool failed(const Child& c) {
  return c.exited && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
}

std::string log_path_for(const std::string& base, size_t i, size_t n) {
  if (base.empty() || n == 1) return base;
  std::string stem =
      base.size() > 4 && base.ends_with(".log") ? base.substr(0, base.size() - 4) : base;
  return fmt::format("{}.p{}.log", stem, i);
}

void write_logs(const std::vector<Child>& children, const std::string& base) {
  for (size_t i = 0; i < children.size(); ++i) {
    std::string path = log_path_for(base, i, children.size());
    if (path.empty()) continue;
    std::ofstream log(path, std::ios::trunc);
    log << "# " << children[i].command << "\n" << children[i].err;
    if (!children[i].out.empty()) log << "# stdout:\n" << children[i].out;
  }
}

std::string shell_words(const std::string& exe, const std::vector<std::string>& args) {
  std::string line = exe;
  for (const std::string& a : args) line += " " + a;
  return line;
}

// Owns a measurement's children: whatever happens, none outlives it and no pipe leaks.
struct ChildSet {
  std::vector<Child> list;
  explicit ChildSet(size_t n) : list(n) {}
  ~ChildSet() {
    kill_all(list);
    for (Child& c : list) close_fd(c.in_fd), close_fd(c.out_fd), close_fd(c.err_fd);
  }
  // Kills what still runs, reads what the pipes hold, and writes the logs.
  void finish(const std::string& log_path) {
    kill_all(list);
    for (Child& c : list) {
      close_fd(c.in_fd);
      // Non-blocking: whatever a child wrote before it exited is in the pipe, and an orphaned
      // grandchild holding the pipe open must not make us wait.
      drain(c.out_fd, c.out);
      drain(c.err_fd, c.err);
      close_fd(c.out_fd), close_fd(c.err_fd);
    }
    write_logs(list, log_path);
  }
};

Measurement run_children(const std::string& exe, const TrialRequest& request) {
  const size_t n = static_cast<size_t>(request.processes);
  HFTA_CHECK(n >= 1, "a measurement needs at least one process, got {}", request.processes);
  const ForeignLoadMeter meter;  // what the machine did beyond our processes while they ran
  const bool barrier = n > 1;    // one process needs no common start
  // Processes sharing the cores must not spin at OpenMP barriers (libgomp's default): a spinning
  // thread holds the core its neighbour's late thread needs (docs/design.md, "OpenMP wait
  // policy", has the measurements). A policy the user set is kept.
  std::vector<std::string> extra_env;
  if (n > 1 && std::getenv("OMP_WAIT_POLICY") == nullptr)
    extra_env.push_back("OMP_WAIT_POLICY=passive");
  ChildSet set(n);
  std::vector<Child>& children = set.list;
  std::string failure;  // the first reason the measurement failed
  for (size_t i = 0; i < n; ++i) {
    TrialOptions options = request.trial;
    options.seed += i;
    auto args = trial_arguments(options, barrier);
    children[i].command = shell_words(exe, args);
    for (const std::string& e : extra_env) children[i].command = e + " " + children[i].command;
    spawn(exe, args, barrier, extra_env, children[i]);
  }

  bool go_sent = !barrier;
  while (true) {
    if (InterruptGuard::interrupted()) {
      set.finish(request.log_path);
      throw Interrupted("interrupted");
    }
    std::vector<pollfd> fds;
    for (Child& c : children)
      for (int fd : {c.out_fd, c.err_fd})
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 20);
    bool all_exited = true, interrupted_child = false;
    for (Child& c : children) {
      drain(c.out_fd, c.out);
      drain(c.err_fd, c.err);
      if (!c.ready && c.out.find(std::string(kTrialReadyLine) + "\n") != std::string::npos)
        c.ready = true;
      if (!reap(c, false)) {
        all_exited = false;
        c.max_rss = std::max(c.max_rss, current_rss_bytes(c.pid));  // for killed processes
      }
      if (c.exited && WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGINT)
        interrupted_child = true;
    }
    if (interrupted_child) {  // Ctrl-C reached the children first
      set.finish(request.log_path);
      throw Interrupted("interrupted");
    }
    if (failure.empty()) {
      for (size_t i = 0; i < n && failure.empty(); ++i)
        if (failed(children[i]) || (!go_sent && children[i].exited))
          failure = (n > 1 ? fmt::format("process {} of {}: ", i + 1, n) : "") +
                    describe_exit(children[i]);
      if (request.memory_limit_bytes > 0 && failure.empty()) {
        int64_t total = 0;
        for (const Child& c : children)
          if (!c.exited) total += current_rss_bytes(c.pid);
        if (total > request.memory_limit_bytes)
          failure = fmt::format("RSS reached {} MiB, over the memory budget of {} MiB: killed",
                                total >> 20, request.memory_limit_bytes >> 20);
      }
      if (!failure.empty()) kill_all(children);  // the others' numbers would mean nothing
    }
    if (!go_sent && failure.empty() &&
        std::all_of(children.begin(), children.end(), [](const Child& c) { return c.ready; })) {
      // All processes are loaded and waiting: release them together.
      // SIGPIPE ignored meanwhile: a child that died after "ready" shows up as a failure.
      struct sigaction ignore {
      }, old{};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      sigaction(SIGPIPE, &ignore, &old);
      for (Child& c : children) {
        ssize_t ignored = write(c.in_fd, "go\n", 3);
        (void)ignored;
        close_fd(c.in_fd);
      }
      sigaction(SIGPIPE, &old, nullptr);
      go_sent = true;
    }
    if (all_exited || !failure.empty()) break;
  }
  set.finish(request.log_path);

  Measurement m;
  std::vector<TrialReport> reports;
  for (size_t i = 0; i < n && failure.empty(); ++i) {
    auto report = parse_trial_report(children[i].out);
    if (report)
      reports.push_back(*report);
    else
      failure =
          (n > 1 ? fmt::format("process {} of {}: ", i + 1, n) : "") + describe_exit(children[i]);
  }
  if (!failure.empty()) {
    m.error = failure;
    for (const Child& c : children) m.peak_rss_bytes += c.max_rss;
    return m;
  }
  m = combine_reports(reports, request.trial.steps);
  double children_cpu = 0.0;
  for (const Child& c : children) children_cpu += c.cpu_seconds;
  m.foreign_load = std::clamp(meter.share(children_cpu), 0.0, 1.0);
  return m;
}

}  // namespace

TrialRunner process_trial_runner(const std::string& executable) {
  return [executable](const TrialRequest& request) { return run_children(executable, request); };
}

}  // namespace hfta
