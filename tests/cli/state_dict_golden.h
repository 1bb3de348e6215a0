// The export check of the CLI matrix (test_cli_matrix_slow.cpp): a file written by `hfta export`
// against the PyTorch state_dict of its model in tests/cli/golden/state_dicts.txt (made by
// benchmarks/torch_state_dicts.py).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "test_files.h"

namespace hfta::test {

// A tensor as tests/cli/golden/state_dicts.txt writes it: "<dtype> <d0>x<d1>x..." ("scalar" for a
// 0-d tensor), by name.
using TensorTable = std::map<std::string, std::string>;

// tests/cli/golden/state_dicts.txt (benchmarks/torch_state_dicts.py): the PyTorch state_dict of
// each matrix model ("dcgan" the generator, "dcgan:d" the discriminator).
inline std::map<std::string, TensorTable> read_golden_state_dicts() {
  const std::string path = std::string(HFTA_SOURCE_DIR) + "/tests/cli/golden/state_dicts.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::map<std::string, TensorTable> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    std::string model, name, dtype, shape;
    row >> model >> name >> dtype >> shape;
    if (row.fail()) {
      ADD_FAILURE() << "malformed line in " << path << ": " << line;
      continue;
    }
    EXPECT_FALSE(out[model].count(name)) << path << " lists " << model << " " << name << " twice";
    out[model][name] = dtype + " " + shape;
  }
  return out;
}

// The tensors of a safetensors file's JSON header, as the golden file writes them.
inline std::optional<TensorTable> safetensors_tensors(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " was not written";
    return std::nullopt;
  }
  const std::string bytes = test::read_file(path);
  if (bytes.size() <= 9u || bytes[8] != '{') {
    ADD_FAILURE() << path << " does not start with a length and a JSON header";
    return std::nullopt;
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<unsigned char>(bytes[i]);
  if (length > bytes.size() - 8) {
    ADD_FAILURE() << path << ": header length " << length << " beyond the file's " << bytes.size()
                  << " bytes";
    return std::nullopt;
  }
  TensorTable out;
  try {
    const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      std::string shape;
      for (const auto& d : entry.at("shape")) {
        if (!shape.empty()) shape += 'x';
        shape += std::to_string(d.get<int64_t>());
      }
      out[name] = entry.at("dtype").get<std::string>() + " " + (shape.empty() ? "scalar" : shape);
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": bad JSON header: " << e.what();
    return std::nullopt;
  }
  return out;
}

// The file `path` written by `hfta export` holds exactly the tensors of golden model `model`'s
// PyTorch state_dict: the same names, dtypes and shapes.
inline void expect_torch_state_dict(const std::string& path, const std::string& model) {
  const std::map<std::string, TensorTable> golden = read_golden_state_dicts();
  const auto expected = golden.find(model);
  if (expected == golden.end()) {
    ADD_FAILURE() << "tests/cli/golden/state_dicts.txt has no state_dict of " << model
                  << ": run benchmarks/torch_state_dicts.py";
    return;
  }
  const std::optional<TensorTable> actual = safetensors_tensors(path);
  if (!actual) return;
  std::vector<std::string> missing, extra, differ;
  for (const auto& [name, tensor] : expected->second) {
    const auto it = actual->find(name);
    if (it == actual->end()) {
      missing.push_back(name + " (" + tensor + ")");
    } else if (it->second != tensor) {
      differ.push_back(name + ": file " + it->second + ", torch " + tensor);
    }
  }
  for (const auto& [name, tensor] : *actual)
    if (!expected->second.count(name)) extra.push_back(name + " (" + tensor + ")");
  EXPECT_TRUE(missing.empty() && extra.empty() && differ.empty())
      << path << " versus PyTorch's " << model << " state_dict (tests/cli/golden/state_dicts.txt)"
      << fmt::format(
             ":\n  missing from the file ({}): {}\n  extra in the file ({}): {}\n  dtype or shape "
             "differs ({}): {}",
             missing.size(), fmt::join(missing, ", "), extra.size(), fmt::join(extra, ", "),
             differ.size(), fmt::join(differ, ", "));
}

}  // namespace hfta::test
