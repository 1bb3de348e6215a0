// What every fuzz target shares: the readers take paths, so each input is written to a file in a
// temporary directory made once per process (removed at exit) and read from there.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace hfta::fuzz {

// The process's temporary directory, made on first use. Never destroyed: the exit handler that
// removes the directory runs after static destructors.
inline const std::string& temp_dir() {
  static const std::string& dir = *[] {
    auto* path =
        new std::string((std::filesystem::temp_directory_path() / "hfta_fuzz_XXXXXX").string());
    if (::mkdtemp(path->data()) == nullptr) ::abort();
    std::atexit([] { std::filesystem::remove_all(temp_dir()); });
    return path;
  }();
  return dir;
}

// Writes the fuzz input to `name` inside temp_dir() and returns its path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = temp_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) ::abort();
  return path;
}

}  // namespace hfta::fuzz
