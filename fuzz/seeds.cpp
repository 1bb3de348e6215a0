// The fuzz targets' seed corpora (fuzz/seeds.h), written by the project's own writers.
#include "fuzz/seeds.h"

#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "datasets/cifar10.h"
#include "datasets/idx.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "io/safetensors.h"
#include "tests/io/seed_files.h"
#include "tests/io/seed_workflow_files.h"

namespace hfta::fuzz {
namespace {

namespace fs = std::filesystem;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0)
    throw Error("cannot write " + path);
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr || gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) <= 0 ||
      gzclose(f) != Z_OK)
    throw Error("cannot write " + path);
}

std::string idx_bytes(const std::vector<uint32_t>& dims) {
  std::string out = {0, 0, static_cast<char>(kIdxUnsignedByte), static_cast<char>(dims.size())};
  uint64_t n = 1;
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>(d >> shift));
    n *= d;
  }
  for (uint64_t i = 0; i < n; ++i) out.push_back(static_cast<char>(3 + 7 * i));
  return out;
}

std::string cifar_bytes(int64_t records) {
  std::string out;
  for (int64_t r = 0; r < records; ++r) {
    out.push_back(static_cast<char>(r % 10));
    for (int64_t j = 0; j < kCifar10RecordBytes - 1; ++j)
      out.push_back(static_cast<char>(j * 13 + r * 5));
  }
  return out;
}

}  // namespace

void write_seeds(const fs::path& corpus) {
  for (const char* reader : {"checkpoint", "safetensors", "idx", "cifar10", "csv"})
    fs::create_directories(corpus / reader);
  save_checkpoint(corpus / "checkpoint/small.ckpt", seed_checkpoint(false));
  save_checkpoint(corpus / "checkpoint/full.ckpt", seed_checkpoint(true));

  write_safetensors(
      corpus / "safetensors/small.safetensors",
      {{.name = "w", .shape = {2, 3}, .floats = {1, 2, 3, 4, 5, 6}},
       {.name = "ids", .shape = {4}, .dtype = "I64", .integers = {7, -8, 9, 1ll << 40}},
       {.name = "scalar", .shape = {}, .floats = {0.5f}},
       {.name = "empty", .shape = {0, 3}}},
      {{"format", "pt"}});
  write_safetensors(corpus / "safetensors/bare.safetensors",
                    {{.name = "b", .shape = {1}, .floats = {2}}});

  write_bytes(corpus / "idx/images-idx3-ubyte", idx_bytes({3, 4, 5}));
  write_bytes(corpus / "idx/labels-idx1-ubyte", idx_bytes({7}));
  write_gzip(corpus / "idx/images-idx3-ubyte.gz", idx_bytes({2, 3, 3}));

  write_bytes(corpus / "cifar10/one_record.bin", cifar_bytes(1));
  write_bytes(corpus / "cifar10/two_records.bin", cifar_bytes(2));

  CsvWriter csv((corpus / "csv/metrics.csv").string(), {"name", "value", "count", "note"});
  for (const std::vector<std::string>& row :
       std::vector<std::vector<std::string>>{{"a", "1.5", "7", "plain"},
                                             {"b,c", "-2e3", "-8", "has \"quotes\""},
                                             {"d", "nan", "1099511627776", "two\nlines"},
                                             {"", "0", "0", ""}})
    csv.row(row);
  CsvWriter one((corpus / "csv/one_column.csv").string(), {"step"});
  one.row({"1"});

  // The workflows' readers (tests/io/seed_workflow_files.h); the writers that make a folder's
  // files write them into the reader's folder itself.
  const auto write_all = [&](const char* reader, const std::vector<seeds::NamedText>& files) {
    for (const auto& [name, text] : files) seeds::write_text(corpus / reader / name, text);
  };
  for (const char* reader :
       {"text", "shapenet", "plan_cache", "search_space", "sweep_results", "tune_state"})
    fs::create_directories(corpus / reader);
  write_all("text", seeds::text_corpus_files());
  write_all("shapenet", seeds::shapenet_files());
  write_all("plan_cache", seeds::plan_cache_files(corpus / "plan_cache"));
  write_all("search_space", seeds::search_space_files());
  write_all("sweep_results", seeds::sweep_files(corpus / "sweep_results"));
  write_all("tune_state", seeds::tune_state_files(corpus / "tune_state"));
}

}  // namespace hfta::fuzz
