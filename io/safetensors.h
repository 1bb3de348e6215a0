// The safetensors format (huggingface/safetensors), which PyTorch users load with
// safetensors.torch.load_file or a few lines of numpy:
//   uint64 little-endian N, N bytes of JSON header, then the tensors' bytes.
// The header maps each name to {"dtype", "shape", "data_offsets": [begin, end)} (offsets into the
// bytes after the header) and may hold "__metadata__" (string to string).
// Written by hand: the format is a dozen lines and no Debian package provides a C++ library.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hfta {

struct SafeTensor {
  std::string name;
  std::vector<int64_t> shape;  // [] for a scalar
  // One of the two, by dtype: "F32" uses floats, "I64" uses integers.
  std::string dtype = "F32";
  std::vector<float> floats;
  std::vector<int64_t> integers;
};

// Writes atomically (temporary file, then rename). Throws hfta::Error when a tensor's values do
// not match its shape or the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Throws hfta::Error naming the file when it is missing, truncated or not safetensors, or holds a
// dtype other than F32 and I64.
std::vector<SafeTensor> read_safetensors(const std::string& path,
                                         std::map<std::string, std::string>* metadata = nullptr);

}  // namespace hfta
