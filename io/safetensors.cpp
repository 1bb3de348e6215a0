#include "io/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/temp_file.h"

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
  TempFile tmp(path + ".tmp");
  {
    std::ofstream out(tmp.path(), std::ios::binary | std::ios::trunc);
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
  std::filesystem::rename(tmp.path(), path, ec);
  HFTA_CHECK(!ec, "cannot rename {} to {}: {}", tmp.path(), path, ec.message());
  tmp.renamed();
}

std::vector<SafeTensor> read_safetensors(const std::string& path,
                                         std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  HFTA_CHECK(in.good(), "cannot open {}", path);
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(path, ec);
  HFTA_CHECK(!ec, "cannot read {}: {}", path, ec.message());
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), sizeof(n));
  HFTA_CHECK(in.good(), "{} is not a safetensors file: {} bytes, too short for a header length",
             path, file_bytes);
  HFTA_CHECK(n <= file_bytes - sizeof(n),
             "{} is not a safetensors file: its header length {} exceeds the file of {} bytes",
             path, n, file_bytes);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail("{} is not a safetensors file: its header is not JSON ({})", path, e.what());
  }
  HFTA_CHECK(header.is_object(), "{} is not a safetensors file: its header is not a JSON object",
             path);
  const uint64_t data_bytes = file_bytes - sizeof(n) - n;
  std::vector<char> data(data_bytes);
  in.read(data.data(), static_cast<std::streamsize>(data_bytes));
  HFTA_CHECK(in.good() || data_bytes == 0, "{} is truncated", path);
  std::vector<SafeTensor> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      try {
        if (metadata != nullptr) *metadata = entry.get<std::map<std::string, std::string>>();
      } catch (const nlohmann::json::exception& e) {
        fail("{}: __metadata__ is not a map of strings to strings ({})", path, e.what());
      }
      continue;
    }
    SafeTensor t;
    t.name = name;
    try {
      t.dtype = entry.at("dtype").get<std::string>();
      HFTA_CHECK(t.dtype == "F32" || t.dtype == "I64",
                 "{}: tensor {} has dtype {}, expected F32 or I64", path, name, t.dtype);
      // Integers only (nlohmann casts a float such as 1e300 with undefined overflow), each
      // dimension checked against the data before the product is formed, so it cannot overflow.
      const nlohmann::json& shape = entry.at("shape");
      const nlohmann::json& offsets = entry.at("data_offsets");
      auto integers = [](const nlohmann::json& a) {
        return a.is_array() && std::all_of(a.begin(), a.end(), [](const nlohmann::json& v) {
                 return v.is_number_integer();
               });
      };
      HFTA_CHECK(integers(shape) && integers(offsets) && offsets.size() == 2,
                 "{}: tensor {} has shape {} and data_offsets {}, expected arrays of integers "
                 "(two offsets)",
                 path, name, shape.dump(), offsets.dump());
      const uint64_t max_count = data_bytes / element_bytes(t.dtype);
      uint64_t count = 1;
      for (const nlohmann::json& d : shape) {
        const int64_t dim = d.get<int64_t>();
        HFTA_CHECK(dim >= 0 && (count == 0 || static_cast<uint64_t>(dim) <= max_count / count),
                   "{}: tensor {} has shape {}: more elements than its {} data bytes hold", path,
                   name, shape.dump(), data_bytes);
        t.shape.push_back(dim);
        count *= static_cast<uint64_t>(dim);
      }
      const uint64_t bytes = count * element_bytes(t.dtype);
      const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
      HFTA_CHECK(begin <= end && end <= data_bytes && end - begin == bytes,
                 "{}: tensor {} has data_offsets [{}, {}], expected {} bytes for its shape {} "
                 "within the {} data bytes (truncated file?)",
                 path, name, begin, end, bytes, shape.dump(), data_bytes);
      // memcpy of an empty tensor would pass a null pointer.
      if (t.dtype == "F32") {
        t.floats.resize(count);
        if (bytes > 0) std::memcpy(t.floats.data(), data.data() + begin, bytes);
      } else {
        t.integers.resize(count);
        if (bytes > 0) std::memcpy(t.integers.data(), data.data() + begin, bytes);
      }
    } catch (const nlohmann::json::exception& e) {
      fail("{}: tensor {} has a malformed header entry ({})", path, name, e.what());
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace hfta
