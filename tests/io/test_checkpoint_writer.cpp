// Periodic checkpoints: the duration flag, when a snapshot falls due, one write in flight with
// later snapshots delayed (never the caller), write errors surfacing on the calling thread, and
// a torn metrics row dropped on resume.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "cli/cli.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/checkpoint_writer.h"
#include "io/csv.h"
#include "tasks/classifier/resume.h"
#include "test_files.h"

namespace hfta {
namespace {

using Clock = CheckpointSchedule::Clock;
using test::expect_hfta_error;
using test::TempDir;

TEST(Duration, ParsesSecondsAndUnits) {
  EXPECT_EQ(parse_duration_seconds("90", "--x"), 90.0);
  EXPECT_EQ(parse_duration_seconds("2.5", "--x"), 2.5);
  EXPECT_EQ(parse_duration_seconds("90s", "--x"), 90.0);
  EXPECT_EQ(parse_duration_seconds("5m", "--x"), 300.0);
  EXPECT_EQ(parse_duration_seconds("1.5m", "--x"), 90.0);
  EXPECT_EQ(parse_duration_seconds("1h", "--x"), 3600.0);
  EXPECT_EQ(parse_duration_seconds("0", "--x"), 0.0);
  EXPECT_EQ(parse_duration_seconds("0m", "--x"), 0.0);
  EXPECT_EQ(parse_duration_seconds("off", "--x"), 0.0);
}

TEST(Duration, RejectsOtherTextNamingTheFlag) {
  for (const char* bad : {"", "m", "5x", "5 m", "5min", "m5", "nan", "inf", "1e999", "5mm"}) {
    try {
      parse_duration_seconds(bad, "--checkpoint-interval");
      ADD_FAILURE() << "'" << bad << "' should be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("--checkpoint-interval '{}' is not a "
                                                       "duration",
                                                       bad)),
                std::string::npos)
          << e.what();
    }
  }
  try {
    parse_duration_seconds("-5m", "--checkpoint-interval");
    ADD_FAILURE() << "-5m should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'-5m' is negative"), std::string::npos) << e.what();
  }
}

TEST(Duration, TheTrainFlagsRefuseBadValues) {
  expect_hfta_error("train --checkpoint-interval 5x",
                    "--checkpoint-interval: '5x' is not a duration");
  expect_hfta_error("train --checkpoint-interval=-1h", "'-1h' is negative");
  expect_hfta_error("train --checkpoint-every -3", "--checkpoint-every: -3 is less than 0");
}

TEST(CheckpointSchedule, FallsDueBySteps) {
  const auto t0 = Clock::now();
  CheckpointSchedule s{.every_steps = 3};
  s.start(10, t0);
  EXPECT_FALSE(s.due(11, t0));
  EXPECT_FALSE(s.due(12, t0 + std::chrono::hours(100)));
  EXPECT_TRUE(s.due(13, t0));
  EXPECT_TRUE(s.due(15, t0));  // a delayed snapshot stays due
  s.taken(15, t0);
  EXPECT_FALSE(s.due(17, t0));
  EXPECT_TRUE(s.due(18, t0));
}

TEST(CheckpointSchedule, FallsDueByTimeAndOffWhenBothAreZero) {
  const auto t0 = Clock::now();
  CheckpointSchedule s{.interval_seconds = 60};
  s.start(0, t0);
  EXPECT_FALSE(s.due(1000, t0 + std::chrono::seconds(59)));
  EXPECT_TRUE(s.due(1, t0 + std::chrono::seconds(60)));
  CheckpointSchedule both{.every_steps = 100, .interval_seconds = 60};
  both.start(0, t0);
  EXPECT_TRUE(both.due(100, t0));
  EXPECT_TRUE(both.due(1, t0 + std::chrono::seconds(61)));
  CheckpointSchedule off;
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.due(1000000, t0 + std::chrono::hours(1000)));
}

// A write that blocks until the test releases it, recording what it wrote.
struct GatedWrite {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  std::vector<int64_t> written;
  std::atomic<int> started{0};

  CheckpointWriter::WriteFn fn() {
    return [this](const std::string&, const Checkpoint& c) {
      ++started;
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return open; });
      written.push_back(c.step);
    };
  }
  void release() {
    {
      std::lock_guard lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
};

void wait_until(const std::function<bool()>& done) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!done() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(done()) << "timed out";
}

TEST(CheckpointWriter, OneWriteInFlight) {
  GatedWrite gate;
  CheckpointWriter writer(gate.fn());
  EXPECT_TRUE(writer.idle());
  writer.snapshot().step = 5;
  EXPECT_TRUE(writer.submit("a.bin", 0.25));
  wait_until([&] { return gate.started == 1; });
  EXPECT_FALSE(writer.idle());
  EXPECT_FALSE(writer.submit("b.bin")) << "a second write must not start while one is in flight";
  EXPECT_FALSE(writer.poll().has_value());
  gate.release();
  std::optional<CheckpointWritten> w = writer.wait();
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->step, 5);
  EXPECT_EQ(w->path, "a.bin");
  EXPECT_EQ(w->copy_seconds, 0.25);
  EXPECT_FALSE(writer.poll().has_value()) << "a write is reported once";
  EXPECT_TRUE(writer.idle());
  writer.snapshot().step = 6;
  EXPECT_TRUE(writer.submit("c.bin"));
  writer.wait();
  EXPECT_EQ(gate.written, (std::vector<int64_t>{5, 6}));
}

TEST(PeriodicCheckpoints, ADueSnapshotWaitsForTheWriterNotTheOtherWayRound) {
  GatedWrite gate;
  int64_t step = 0;
  int snapshots = 0;  // taken in after_step, on this thread (a write starts later, on another)
  std::vector<std::string> log;
  PeriodicCheckpoints periodic(
      "run/checkpoint.bin", {.every_steps = 2},
      [&](Checkpoint& c) {
        c.step = step;
        ++snapshots;
      },
      [&](const std::string& line) { log.push_back(line); }, {}, gate.fn());
  periodic.start(0);
  for (step = 1; step <= 7; ++step) periodic.after_step(step);  // never blocks on the gate
  // Step 2 was taken; 4 and 6 fell due while it was being written: one "delayed" line.
  wait_until([&] { return gate.started == 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(gate.started, 1) << "one write in flight";
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("due at step 4 delayed"), std::string::npos) << log[0];
  gate.release();  // from now on writes pass at once
  // The first step after the write ends reports it and takes the overdue snapshot. The loop
  // stops at that snapshot, not when its write starts: on a loaded machine the writer thread
  // may start it only after further steps, one of which would fall due and log a delay.
  ASSERT_EQ(snapshots, 1);
  for (step = 8; snapshots < 2; ++step) {
    periodic.after_step(step);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int64_t taken = step - 1;
  periodic.wait();
  EXPECT_EQ(gate.written, (std::vector<int64_t>{2, taken}));
  ASSERT_EQ(log.size(), 3u);
  EXPECT_NE(log[1].find("checkpoint of step 2 written to run/checkpoint.bin"), std::string::npos)
      << log[1];
  EXPECT_NE(log[2].find(fmt::format("checkpoint of step {} written", taken)), std::string::npos)
      << log[2];
}

// The snapshot is allocated once, in the background, and every snapshot after reuses it.
TEST(PeriodicCheckpoints, TheSnapshotIsReservedInTheBackgroundAndReused) {
  std::thread::id reserved_on;
  const float* reserved = nullptr;
  std::vector<const float*> filled;
  int64_t step = 0;
  PeriodicCheckpoints periodic(
      "x.bin", {.every_steps = 1},
      [&](Checkpoint& c) {
        c.step = step;
        c.tensors.at(0).values.resize(1000);
        filled.push_back(c.tensors[0].values.data());
      },
      [](const std::string&) {},
      [&](Checkpoint& c) {
        reserved_on = std::this_thread::get_id();
        c.tensors.assign(1, {"w", Shape{1, 1000}, std::vector<float>(1000)});
        reserved = c.tensors[0].values.data();
      },
      [](const std::string&, const Checkpoint&) {});
  periodic.start(0);
  for (step = 1; step <= 50 && filled.size() < 3; ++step) {
    periodic.after_step(step);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  periodic.wait();
  EXPECT_NE(reserved_on, std::this_thread::get_id());
  ASSERT_GE(filled.size(), 3u);
  for (const float* p : filled) EXPECT_EQ(p, reserved) << "the snapshot was reallocated";
}

// An interval schedule reserves the snapshot halfway to its first periodic checkpoint, not at the
// start: a run that ends sooner never holds it. (A step schedule reserves at start, above.)
TEST(PeriodicCheckpoints, AnIntervalScheduleReservesTheSnapshotHalfwayToTheFirst) {
  std::atomic<int> reserves{0};
  PeriodicCheckpoints periodic(
      "x.bin", {.interval_seconds = 2.0}, [](Checkpoint&) {}, [](const std::string&) {},
      [&](Checkpoint&) { ++reserves; }, [](const std::string&, const Checkpoint&) {});
  const auto started = Clock::now();
  periodic.start(0);
  periodic.after_step(1);
  if (Clock::now() - started < std::chrono::milliseconds(900)) {  // not a stalled machine
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(reserves, 0) << "reserved long before the first checkpoint is due";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  periodic.after_step(2);
  periodic.wait();
  EXPECT_EQ(reserves, 1);
  periodic.after_step(3);
  periodic.wait();
  EXPECT_EQ(reserves, 1) << "reserved once";
}

TEST(PeriodicCheckpoints, AFailedWriteFailsTheNextStepNamingTheFile) {
  TempDir tmp("writer_error");
  const std::string path = tmp.str() + "/missing_dir/checkpoint.bin";
  int64_t step = 0;
  PeriodicCheckpoints periodic(
      path, {.every_steps = 1},
      [&](Checkpoint& c) {
        c.model = "mlp";
        c.B = 1;
        c.step = step;
        c.model_ids = {0};
        c.epoch_loss_sum = c.last_train_loss = {0.0};
        c.optimizer_steps = c.skipped_steps = {0};
      },
      [](const std::string&) {});
  periodic.start(0);
  periodic.after_step(step = 1);
  try {
    // The write fails in the background; a later step (or the end) reports it.
    for (step = 2; step < 100000; ++step) {
      periodic.after_step(step);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ADD_FAILURE() << "the failed write was never reported";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("periodic checkpoint of step 1"), std::string::npos) << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
  }
}

TEST(PeriodicCheckpoints, AFailedLastWriteFailsWait) {
  PeriodicCheckpoints periodic(
      "x.bin", {.every_steps = 1}, [](Checkpoint& c) { c.step = 3; }, [](const std::string&) {}, {},
      [](const std::string& path, const Checkpoint&) {
        fail("cannot write checkpoint {}.tmp: No space left on device", path);
      });
  periodic.start(2);
  periodic.after_step(3);
  EXPECT_THROW(
      {
        try {
          periodic.wait();
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("x.bin.tmp: No space left"), std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
}

// An epoch's end (save_now) writes on this thread while the array stands still: the fill is told
// to borrow the live tensors, nothing is copied, and the file holds their values; a periodic
// snapshot, written later on another thread, copies them. No borrowed pointer outlives a save.
TEST(PeriodicCheckpoints, ASaveNowBorrowsTheTensorsAPeriodicSnapshotCopiesThem) {
  TempDir dir("borrow");
  const std::string path = (dir.path / "checkpoint.bin").string();
  std::vector<float> live(300);
  for (size_t i = 0; i < live.size(); ++i) live[i] = 0.5f * static_cast<float>(i) - 7.0f;
  std::vector<bool> borrowed;         // what each fill was told
  std::vector<const float*> written;  // each written tensor's borrowed source
  int64_t step = 0;
  PeriodicCheckpoints periodic(
      path, {.every_steps = 2},
      [&](Checkpoint& c) {
        borrowed.push_back(c.borrow_tensors);
        c.model = "lenet";
        c.B = 3;
        c.step = step;
        c.model_ids = {0, 1, 2};
        c.epoch_loss_sum = c.last_train_loss = {0.0, 0.0, 0.0};
        c.optimizer_steps = c.skipped_steps = {step, step, step};
        c.tensors.resize(1);
        CheckpointTensor& t = c.tensors[0];
        t.name = "w";
        t.shape = Shape{3, 100};
        if (c.borrow_tensors) {
          t.source = live.data();
        } else {
          t.source = nullptr;
          t.values = live;
        }
      },
      [](const std::string&) {}, {},
      [&](const std::string&, const Checkpoint& c) {
        for (const CheckpointTensor& t : c.tensors) written.push_back(t.source);
      });
  periodic.start(0);
  step = 1;
  periodic.save_now(step);
  const Checkpoint saved = load_checkpoint(path);
  ASSERT_EQ(saved.tensors.size(), 1u);
  EXPECT_EQ(saved.tensors[0].values, live);
  EXPECT_EQ(saved.step, 1);
  step = 3;                   // every 2 steps, counted from the save at step 1
  periodic.after_step(step);  // due: a copy, written in the background
  periodic.wait();
  EXPECT_EQ(borrowed, (std::vector<bool>{true, false}));
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0], nullptr) << "a periodic snapshot must not point into the live array";
  // The run's end: inspected borrowed (no copy), and borrowing nothing afterwards.
  periodic.inspect_now([&](const Checkpoint& c) {
    ASSERT_EQ(c.tensors.size(), 1u);
    EXPECT_EQ(c.tensors[0].source, live.data());
    EXPECT_EQ(model_state_crc32(c, 2), model_state_crc32(saved, 2));
  });
  EXPECT_EQ(borrowed, (std::vector<bool>{true, false, true}));
  step = 5;
  periodic.after_step(step);
  periodic.wait();
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[1], nullptr) << "a snapshot after inspect_now must copy again";
}

TEST(PeriodicCheckpoints, NegativeSchedulesAreRefused) {
  auto make = [](CheckpointSchedule s) {
    PeriodicCheckpoints p(
        "x.bin", s, [](Checkpoint&) {}, [](const std::string&) {});
  };
  EXPECT_THROW(make({.every_steps = -1}), Error);
  EXPECT_THROW(make({.interval_seconds = -1.0}), Error);
}

TEST(PruneMetrics, DropsARowCutShortByACrashAndRowsPastTheCheckpoint) {
  TempDir tmp("prune");
  const std::string path = tmp.str() + "/metrics.csv";
  std::ofstream(path) << "model,step,epoch,lr,loss\n0,1,1,0.1,2.5\n1,1,1,0.1,2.6\n0,2,1,0.1,2.4\n"
                         "1,2,1,0.1,2.3\n0,3,1,0.1,2.2\n1,3";
  prune_metrics(path, {{0, 2}, {1, 2}});
  CsvTable t = read_csv(path);
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows.back(), (std::vector<std::string>{"1", "2", "1", "0.1", "2.3"}));
  std::ofstream(path) << "model,st";  // killed while writing the header
  prune_metrics(path, {{0, 2}});
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
}

}  // namespace
}  // namespace hfta
