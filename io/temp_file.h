// The temporary file of an atomic write (write `<path>.tmp`, then rename it over `<path>`): removed
// when the write fails part way (a full disk, a file size limit, a rename refused), so that a
// failed save leaves the directory as it was instead of a half-written `.tmp` beside the file.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace hfta {

class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (!kept_) {
      std::error_code ignored;  // best effort: the write's own error is the one to report
      std::filesystem::remove(path_, ignored);
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  // After a successful rename the temporary name no longer exists; nothing to remove.
  void renamed() { kept_ = true; }

 private:
  std::string path_;
  bool kept_ = false;
};

}  // namespace hfta
