#include "io/safetensors.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace hfta {

namespace {
int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
size_t element_bytes(const std::string& dtype) { return dtype == "I64" ? 8 : 4; }
}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafeTensor& t : tensors) {
    HFTA_CHECK(t.dtype == "F32" || t.dtype == "I64", "{}: dtype {} is not F32 or I64", t.name,
               t.dtype);
    const size_t count = t.dtype == "F32" ? t.floats.size() : t.integers.size();
    HFTA_CHECK(static_cast<int64_t>(count) == numel(t.shape),
               "{}: {} values for shape of {} elements", t.name, count, numel(t.shape));
    HFTA_CHECK(!header.contains(t.name), "two tensors named {}", t.name);
    const uint64_t bytes = count * element_bytes(t.dtype);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    HFTA_CHECK(out.good(), "cannot write {}: check that its directory exists and is writable",
               path);
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof(n));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const SafeTensor& t : tensors) {
      if (t.dtype == "F32")
        out.write(reinterpret_cast<const char*>(t.floats.data()),
                  static_cast<std::streamsize>(t.floats.size() * sizeof(float)));
      else
        out.write(reinterpret_cast<const char*>(t.integers.data()),
                  static_cast<std::streamsize>(t.integers.size() * sizeof(int64_t)));
    }
    HFTA_CHECK(out.good(), "writing {} failed (disk full?)", path);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  HFTA_CHECK(!ec, "cannot rename {} to {}: {}", tmp, path, ec.message());
}

std::vector<SafeTensor> read_safetensors(const std::string& path,
                                         std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  HFTA_CHECK(in.good(), "cannot open {}", path);
  const auto file_bytes = std::filesystem::file_size(path);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), sizeof(n));
  HFTA_CHECK(in.good() && n <= file_bytes - sizeof(n),
             "{} is not a safetensors file (its header length {} exceeds the file)", path, n);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail("{} is not a safetensors file: its header is not JSON ({})", path, e.what());
  }
  const uint64_t data_bytes = file_bytes - sizeof(n) - n;
  std::vector<char> data(data_bytes);
  in.read(data.data(), static_cast<std::streamsize>(data_bytes));
  HFTA_CHECK(in.good() || data_bytes == 0, "{} is truncated", path);
  std::vector<SafeTensor> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (metadata != nullptr) *metadata = entry.get<std::map<std::string, std::string>>();
      continue;
    }
    SafeTensor t;
    t.name = name;
    try {
      t.dtype = entry.at("dtype").get<std::string>();
      t.shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      HFTA_CHECK(t.dtype == "F32" || t.dtype == "I64",
                 "{}: tensor {} has dtype {}, expected F32 or I64", path, name, t.dtype);
      HFTA_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1] && offsets[1] <= data_bytes &&
                     offsets[1] - offsets[0] ==
                         static_cast<uint64_t>(numel(t.shape)) * element_bytes(t.dtype),
                 "{}: tensor {} has bad data offsets for its shape (truncated file?)", path, name);
      const size_t count = static_cast<size_t>(numel(t.shape));
      if (t.dtype == "F32") {
        t.floats.resize(count);
        std::memcpy(t.floats.data(), data.data() + offsets[0], count * sizeof(float));
      } else {
        t.integers.resize(count);
        std::memcpy(t.integers.data(), data.data() + offsets[0], count * sizeof(int64_t));
      }
    } catch (const nlohmann::json::exception& e) {
      fail("{}: tensor {} has a malformed header entry ({})", path, name, e.what());
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace hfta
