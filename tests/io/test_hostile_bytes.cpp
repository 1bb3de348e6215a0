// Hostile bytes: each binary reader (checkpoint, safetensors, IDX plain and gzip, CIFAR-10, CSV)
// meets thousands of seeded mutations of valid small files that the project's own writers make:
// bit flips, bytes overwritten with 0x00, 0xFF or noise, truncation at every boundary between a
// file's parts, inserted and erased bytes, and length or count fields (binary ones, and the
// numbers of a JSON header) overwritten with 2^40, 2^63-1, 2^64-1, negative or fractional values.
// Every read either succeeds or throws hfta::Error naming the file; it never crashes, hangs,
// throws anything else, or grows the process's peak memory by more than 64 MiB. Then, per reader,
// headers that claim about a terabyte are refused at once, without the allocation.
//
// A failure prints its mutation's seed; HFTA_FUZZ_SEED=<seed> replays that one mutation alone (of
// every seed file the filtered test visits). HFTA_FUZZ_ITERS=<n> sets the mutations per seed file
// (default 4000) for long runs. A crash or a hang (10 s per read) prints the mutation it was in.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <string>

#include "datasets/cifar10.h"
#include "datasets/idx.h"
#include "hostile_bytes.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "io/safetensors.h"
#include "test_files.h"
#include "tests/io/seed_files.h"

namespace hfta {
namespace {

// --- checkpoints --------------------------------------------------------------------------------

// The parts of a checkpoint file: magic, version, header length, JSON header, floats, CRC.
SeedFile checkpoint_seed(const std::string& name, const std::string& bytes) {
  const Field header_bytes{12, 8};
  const size_t text_end = 20 + get_field(bytes, header_bytes);
  return {.name = name,
          .bytes = bytes,
          .fields = {{8, 4}, header_bytes, {bytes.size() - 4, 4}},
          .boundaries = {0, 8, 12, 20, text_end, bytes.size() - 4, bytes.size()},
          .text_begin = 20,
          .text_end = text_end,
          .length = header_bytes};
}

// `bytes` with its last four bytes replaced by the CRC-32 of those before them (a version 3
// checkpoint's checksum).
std::string with_crc(const std::string& bytes) {
  if (bytes.size() < 4) return bytes;
  std::string out = bytes;
  const auto crc =
      static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(out.data()),
                                  static_cast<uInt>(out.size() - 4)));
  set_field(out, {out.size() - 4, 4}, crc);
  return out;
}

TEST(HostileBytes, Checkpoint) {
  TempDir tmp("hostile_checkpoint");
  const std::string path = tmp.str() + "/c.ckpt";
  for (bool everything : {false, true}) {
    const Checkpoint original = seed_checkpoint(everything);
    save_checkpoint(path, original);
    const SeedFile seed = checkpoint_seed(everything ? "full" : "small", read_file(path));
    const Tally t = replay("checkpoint", seed, path, [&] {
      // The CRC covers every byte before it: whatever loads is the original.
      const Checkpoint c = load_checkpoint(path);
      ASSERT_EQ(c.tensors.size(), original.tensors.size());
      for (size_t i = 0; i < c.tensors.size(); ++i) {
        EXPECT_EQ(c.tensors[i].shape, original.tensors[i].shape) << c.tensors[i].name;
        EXPECT_EQ(c.tensors[i].values, original.tensors[i].values) << c.tensors[i].name;
      }
    });
    EXPECT_EQ(t.changed_but_read, 0) << "a damaged checkpoint loaded";
    // The same mutations with the checksum made valid again (a file crafted, or damaged before
    // it was summed): the header's own checks must refuse what the CRC no longer does.
    replay(
        "checkpoint with a valid crc", seed, path, [&] { load_checkpoint(path); }, with_crc);
  }
}

// The header of `bytes` with `from` replaced by `to`, its length field updated and its checksum
// made valid.
std::string edit_checkpoint_header(const std::string& bytes, const std::string& from,
                                   const std::string& to) {
  const Field header_bytes{12, 8};
  std::string text = bytes.substr(20, get_field(bytes, header_bytes));
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << text;
  if (at == std::string::npos) return bytes;
  text.replace(at, from.size(), to);
  std::string out = bytes.substr(0, 20) + text + bytes.substr(20 + get_field(bytes, header_bytes));
  set_field(out, header_bytes, text.size());
  return with_crc(out);
}

TEST(HostileBytes, CheckpointHeadersClaimingTerabytesAreRefusedBeforeAllocating) {
  TempDir tmp("hostile_checkpoint_tb");
  const std::string path = tmp.str() + "/c.ckpt";
  save_checkpoint(path, seed_checkpoint(false));
  const std::string good = read_file(path);

  std::string bytes = good;
  set_field(bytes, {12, 8}, uint64_t{1} << 40);  // header length
  write_bytes(path, bytes);
  expect_quick_refusal([&] { load_checkpoint(path); }, path, {"1099511627776"});

  // 2^38 floats: a terabyte of data.
  write_bytes(path,
              edit_checkpoint_header(good, "\"data_floats\":18", "\"data_floats\":274877906944"));
  expect_quick_refusal([&] { load_checkpoint(path); }, path, {"274877906944"});
  // 2^62 floats, whose byte count overflows 64 bits.
  write_bytes(path, edit_checkpoint_header(good, "\"data_floats\":18",
                                           "\"data_floats\":4611686018427387904"));
  expect_quick_refusal([&] { load_checkpoint(path); }, path, {"4611686018427387904"});

  // One tensor claiming 2^41 floats, and one whose shape's product overflows 64 bits.
  write_bytes(path,
              edit_checkpoint_header(good, "\"shape\":[2,3]", "\"shape\":[2,1048576,1048576]"));
  expect_quick_refusal([&] { load_checkpoint(path); }, path, {"1048576"});
  write_bytes(path, edit_checkpoint_header(good, "\"shape\":[2,3]",
                                           "\"shape\":[2,4294967296,4294967296,4294967296]"));
  expect_quick_refusal([&] { load_checkpoint(path); }, path, {"4294967296"});
  // An offset past the data, and one that wraps around 64 bits.
  write_bytes(path, edit_checkpoint_header(good, "\"offset\":12", "\"offset\":1099511627776"));
  expect_quick_refusal([&] { load_checkpoint(path); }, path, {"1099511627776"});
  write_bytes(path,
              edit_checkpoint_header(good, "\"offset\":12", "\"offset\":18446744073709551615"));
  expect_quick_refusal([&] { load_checkpoint(path); }, path, {"18446744073709551615"});
}

// --- safetensors -----------------------------------------------------------------------------

std::vector<SafeTensor> small_safetensors() {
  return {{.name = "w", .shape = {2, 3}, .floats = {1, 2, 3, 4, 5, 6}},
          {.name = "ids", .shape = {4}, .dtype = "I64", .integers = {7, -8, 9, 1ll << 40}},
          {.name = "scalar", .shape = {}, .floats = {0.5f}},
          {.name = "empty", .shape = {0, 3}}};
}

SeedFile safetensors_seed(const std::string& bytes) {
  const Field header_bytes{0, 8};
  const size_t text_end = 8 + get_field(bytes, header_bytes);
  std::vector<size_t> boundaries = {0, 8, text_end, bytes.size()};
  for (size_t at = text_end; at < bytes.size(); at += 4) boundaries.push_back(at);
  return {.name = "small",
          .bytes = bytes,
          .fields = {header_bytes},
          .boundaries = boundaries,
          .text_begin = 8,
          .text_end = text_end,
          .length = header_bytes};
}

TEST(HostileBytes, Safetensors) {
  TempDir tmp("hostile_safetensors");
  const std::string path = tmp.str() + "/t.safetensors";
  const auto original = small_safetensors();
  write_safetensors(path, original, {{"format", "pt"}});
  std::map<std::string, std::string> metadata;
  ASSERT_EQ(read_safetensors(path, &metadata).size(), original.size());
  // Safetensors has no checksum: what reads may hold changed values, but consistent shapes.
  replay("safetensors", safetensors_seed(read_file(path)), path, [&] {
    for (const SafeTensor& t : read_safetensors(path, &metadata)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      EXPECT_EQ(static_cast<int64_t>(t.dtype == "F32" ? t.floats.size() : t.integers.size()), n)
          << t.name;
    }
  });
}

TEST(HostileBytes, SafetensorsHeadersClaimingTerabytesAreRefusedBeforeAllocating) {
  TempDir tmp("hostile_safetensors_tb");
  const std::string path = tmp.str() + "/t.safetensors";
  std::string bytes(8, '\0');
  set_field(bytes, {0, 8}, uint64_t{1} << 40);
  bytes += "{}";
  write_bytes(path, bytes);
  expect_quick_refusal([&] { read_safetensors(path); }, path, {"1099511627776"});

  // A header of `json`, padded to 8 bytes, and 16 bytes of data.
  auto with_header = [&](std::string json) {
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    set_field(out, {0, 8}, json.size());
    write_bytes(path, out + json + std::string(16, '\x01'));
  };
  with_header(R"({"w":{"dtype":"F32","shape":[274877906944],"data_offsets":[0,1099511627776]}})");
  expect_quick_refusal([&] { read_safetensors(path); }, path, {"274877906944"});
  // 2^62 floats are 2^64 bytes, which wrap to the 0 bytes between the offsets.
  with_header(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})");
  expect_quick_refusal([&] { read_safetensors(path); }, path, {"4611686018427387904"});
  with_header(R"({"w":{"dtype":"I64","shape":[-1,-2],"data_offsets":[0,16]}})");
  expect_quick_refusal([&] { read_safetensors(path); }, path, {"-1"});
  with_header(R"({"w":{"dtype":"F32","shape":[1e300],"data_offsets":[0,16]}})");
  expect_quick_refusal([&] { read_safetensors(path); }, path, {"integers"});
}

// --- IDX ----------------------------------------------------------------------------------------

std::string idx_bytes(const std::vector<uint32_t>& dims, uint8_t first) {
  std::string out = {0, 0, static_cast<char>(kIdxUnsignedByte), static_cast<char>(dims.size())};
  uint64_t n = 1;
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>(d >> shift));
    n *= d;
  }
  for (uint64_t i = 0; i < n; ++i) out.push_back(static_cast<char>(first + 7 * i));
  return out;
}

SeedFile idx_seed(const std::string& name, const std::vector<uint32_t>& dims) {
  const std::string bytes = idx_bytes(dims, 3);
  SeedFile s{.name = name, .bytes = bytes, .boundaries = {0, 2, 3, 4, bytes.size()}};
  for (size_t i = 0; i < dims.size(); ++i) {
    s.fields.push_back({4 + 4 * i, 4, true});
    s.boundaries.push_back(8 + 4 * i);
  }
  return s;
}

void read_consistent_idx(const std::string& path) {
  const IdxData d = read_idx(path);
  int64_t n = 1;
  for (int64_t v : d.dims) n *= v;
  EXPECT_EQ(static_cast<int64_t>(d.bytes.size()), n);
}

TEST(HostileBytes, Idx) {
  TempDir tmp("hostile_idx");
  for (const auto& [name, dims] : std::vector<std::pair<std::string, std::vector<uint32_t>>>{
           {"images", {3, 4, 5}}, {"labels", {7}}}) {
    const SeedFile plain = idx_seed(name, dims);
    const std::string path = tmp.str() + "/" + name + "-idx-ubyte";
    write_bytes(path, plain.bytes);
    EXPECT_EQ(read_idx(path).bytes.size(), plain.bytes.size() - 4 - 4 * dims.size());
    replay("idx plain", plain, path, [&] { read_consistent_idx(path); });
    // Mutated, then compressed: the same damage behind a valid gzip stream.
    replay(
        "idx inside gzip", plain, path + ".gz", [&] { read_consistent_idx(path + ".gz"); }, gzip);
    // The compressed bytes mutated: gzip header, deflate data, CRC and length trailer.
    const std::string gz = gzip(plain.bytes);
    const SeedFile compressed{.name = name + ".gz",
                              .bytes = gz,
                              .fields = {{gz.size() - 8, 4}, {gz.size() - 4, 4}},
                              .boundaries = {0, 2, 3, 10, gz.size() - 8, gz.size() - 4, gz.size()}};
    replay("idx gzip", compressed, path + ".gz", [&] { read_consistent_idx(path + ".gz"); });
  }
}

TEST(HostileBytes, IdxHeadersClaimingTerabytesAreRefusedBeforeAllocating) {
  TempDir tmp("hostile_idx_tb");
  const std::string path = tmp.str() + "/images-idx3-ubyte";
  // 2^40 bytes in three dimensions: over the reader's cap, refused from the header alone.
  std::string bytes = idx_bytes({1, 1, 1}, 0);
  for (const auto& [i, d] :
       std::vector<std::pair<size_t, uint64_t>>{{0, 256}, {1, 65536}, {2, 65536}})
    set_field(bytes, {4 + 4 * i, 4, true}, d);
  write_bytes(path, bytes);
  expect_quick_refusal([&] { read_idx(path); }, path, {"65536"});
  // 2^35 bytes (32 GiB, under the cap) claimed by 8 bytes of payload, plain and compressed: the
  // payload grows only as its bytes arrive.
  bytes = idx_bytes({2, 2, 2}, 0);
  for (size_t i = 0; i < 3; ++i) set_field(bytes, {4 + 4 * i, 4, true}, i == 2 ? 8 : 65536);
  write_bytes(path, bytes);
  expect_quick_refusal([&] { read_idx(path); }, path, {"34359738368", "only 8"});
  write_bytes(path + ".gz", gzip(bytes));
  expect_quick_refusal([&] { read_idx(path + ".gz"); }, path + ".gz", {"34359738368", "only 8"});
}

// --- CIFAR-10 -----------------------------------------------------------------------------------

std::string cifar_bytes(int64_t records, int salt) {
  std::string out;
  for (int64_t r = 0; r < records; ++r) {
    out.push_back(static_cast<char>((r + salt) % 10));
    for (int64_t j = 0; j < kCifar10RecordBytes - 1; ++j)
      out.push_back(static_cast<char>(j * 13 + r * 5 + salt));
  }
  return out;
}

SeedFile cifar_seed(const std::string& name, int64_t records) {
  const std::string bytes = cifar_bytes(records, 1);
  SeedFile s{.name = name, .bytes = bytes, .boundaries = {0, bytes.size()}};
  for (int64_t r = 0; r < records; ++r) {
    s.boundaries.push_back(static_cast<size_t>(r * kCifar10RecordBytes + 1));
    s.boundaries.push_back(static_cast<size_t>((r + 1) * kCifar10RecordBytes));
  }
  return s;
}

void read_consistent_cifar(const std::string& dir, Split split) {
  const Dataset d = load_cifar10(dir, split);
  d.check();
  EXPECT_EQ(static_cast<int64_t>(d.images.size()), d.size * 3 * 32 * 32);
}

TEST(HostileBytes, Cifar10) {
  TempDir tmp("hostile_cifar10");
  const std::string dir = tmp.str();
  for (int f = 1; f <= 5; ++f)
    write_bytes(fmt::format("{}/data_batch_{}.bin", dir, f), cifar_bytes(1, f));
  const SeedFile test = cifar_seed("test_batch", 2), train = cifar_seed("data_batch_3", 1);
  write_bytes(dir + "/test_batch.bin", test.bytes);
  EXPECT_EQ(load_cifar10(dir, Split::kTest).size, 2);
  replay("cifar10 test split", test, dir + "/test_batch.bin",
         [&] { read_consistent_cifar(dir, Split::kTest); });
  write_bytes(dir + "/data_batch_3.bin", train.bytes);
  EXPECT_EQ(load_cifar10(dir, Split::kTrain).size, 5);
  replay("cifar10 training split", train, dir + "/data_batch_3.bin",
         [&] { read_consistent_cifar(dir, Split::kTrain); });
}

// CIFAR-10 has no header: a file's size is its claim. A sparse file of a terabyte (3.6e8
// records) is refused from its size, before 4.4 TB of floats are allocated.
TEST(HostileBytes, Cifar10FilesClaimingTerabytesAreRefusedBeforeAllocating) {
  TempDir tmp("hostile_cifar10_tb");
  const std::string path = tmp.str() + "/test_batch.bin";
  const int64_t records = (int64_t{1} << 40) / kCifar10RecordBytes;
  write_bytes(path, cifar_bytes(1, 0));
  std::error_code ec;
  fs::resize_file(path, static_cast<uintmax_t>(records * kCifar10RecordBytes), ec);
  if (ec) GTEST_SKIP() << "this file system refuses a sparse terabyte file: " << ec.message();
  expect_quick_refusal([&] { load_cifar10(tmp.str(), Split::kTest); }, path,
                       {std::to_string(records) + " records"});
}

// --- CSV ----------------------------------------------------------------------------------------

TEST(HostileBytes, Csv) {
  TempDir tmp("hostile_csv");
  const std::string path = tmp.str() + "/metrics.csv";
  const std::vector<std::vector<std::string>> rows = {{"a", "1.5", "7", "plain"},
                                                      {"b,c", "-2e3", "-8", "has \"quotes\""},
                                                      {"d", "nan", "1099511627776", "two\nlines"},
                                                      {"", "0", "0", ""}};
  {
    CsvWriter out(path, {"name", "value", "count", "note"});
    for (const auto& row : rows) out.row(row);
  }
  const CsvTable table = read_csv(path);  // reads back what the writer wrote, line breaks too
  EXPECT_EQ(table.rows, rows);
  const std::string bytes = read_file(path);
  SeedFile seed{.name = "metrics", .bytes = bytes, .text_begin = 0, .text_end = bytes.size()};
  for (size_t at = 0; at <= bytes.size(); at = bytes.find('\n', at) + 1) {
    seed.boundaries.push_back(at);
    if (bytes.find('\n', at) == std::string::npos) break;
  }
  replay("csv", seed, path, [&] {
    const CsvTable t = read_csv(path);
    for (size_t r = 0; r < t.rows.size(); ++r) {
      ASSERT_EQ(t.rows[r].size(), t.header.size());
      for (size_t c = 0; c < t.header.size(); ++c) {
        // Fields that are not numbers are refused naming the file.
        for (const auto& parse : std::vector<std::function<void()>>{[&] { t.number(r, c); },
                                                                    [&] { t.integer(r, c); }}) {
          try {
            parse();
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace hfta
