#include "datasets/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/tensor.h"

namespace hfta {
namespace {

// An IDX payload larger than this is certainly a corrupt header (Fashion-MNIST is 47 MB).
constexpr int64_t kMaxIdxBytes = int64_t{1} << 36;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

const char* type_name(uint8_t type) {
  switch (type) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown";
  }
}

// Reads up to n bytes; returns how many were read (fewer only at the end of the data). Throws on
// a corrupt gzip stream.
int64_t read_some(gzFile f, uint8_t* dst, int64_t n, const std::string& path) {
  int64_t done = 0;
  while (done < n) {
    unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, int64_t{1} << 30));
    int got = gzread(f, dst + done, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      fail(
          "IDX file '{}' could not be decompressed ({}): the gzip data is corrupt; download or "
          "reinstall the file",
          path, errnum == Z_ERRNO ? std::strerror(errno) : msg);
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace

IdxData read_idx(const std::string& path) {
  std::error_code ec;
  HFTA_CHECK(std::filesystem::exists(path, ec), "IDX file '{}' does not exist: check the path",
             path);
  HFTA_CHECK(!std::filesystem::is_directory(path, ec),
             "IDX file '{}' is a directory: pass the path of the file itself", path);
  // gzopen reads a file without the gzip magic as plain bytes, so one path serves both.
  GzHandle f(gzopen(path.c_str(), "rb"));
  HFTA_CHECK(f != nullptr, "cannot open IDX file '{}': {}", path, std::strerror(errno));
  gzbuffer(f.get(), 1 << 18);

  uint8_t magic[4];
  int64_t got = read_some(f.get(), magic, 4, path);
  HFTA_CHECK(got == 4, "IDX file '{}' is too short: the header needs 4 bytes, the file has {}",
             path, got);
  HFTA_CHECK(magic[0] == 0 && magic[1] == 0,
             "IDX file '{}' has magic {:02x} {:02x} {:02x} {:02x}, expected 00 00 <type> <rank>: "
             "it is not an IDX file (or not gzip-compressed IDX)",
             path, magic[0], magic[1], magic[2], magic[3]);
  HFTA_CHECK(magic[2] == kIdxUnsignedByte,
             "IDX file '{}' holds elements of type 0x{:02x} ({}), but only 0x08 (unsigned byte) "
             "is supported",
             path, magic[2], type_name(magic[2]));
  const int rank = magic[3];
  HFTA_CHECK(rank >= 1 && rank <= kMaxRank,
             "IDX file '{}' declares {} dimensions, expected 1 to {}: the header is corrupt", path,
             rank, kMaxRank);

  IdxData out;
  uint8_t dim_bytes[4 * kMaxRank];
  got = read_some(f.get(), dim_bytes, 4 * rank, path);
  HFTA_CHECK(got == 4 * rank,
             "IDX file '{}' is truncated in its header: {} dimensions need {} bytes, got {}", path,
             rank, 4 * rank, got);
  int64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* p = dim_bytes + 4 * i;
    int64_t d = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3];
    HFTA_CHECK(d >= 1, "IDX file '{}' has dimension {} of size 0: the file is empty or corrupt",
               path, i);
    out.dims.push_back(d);
    // Checked before the product is formed: 2^36 times a dimension near 2^32 overflows.
    HFTA_CHECK(d <= kMaxIdxBytes / total,
               "IDX file '{}' declares dimensions [{}, ...] whose product exceeds {} bytes: the "
               "header is corrupt",
               path, fmt::join(out.dims, ", "), kMaxIdxBytes);
    total *= d;
  }

  // The payload grows with the bytes actually read (doubling), so a corrupt header that claims
  // up to kMaxIdxBytes allocates at most about twice what the file holds.
  got = 0;
  while (got < total) {
    const int64_t want = std::min(total, std::max(2 * got, int64_t{1} << 20));
    out.bytes.resize(static_cast<size_t>(want));
    const int64_t n = read_some(f.get(), out.bytes.data() + got, want - got, path);
    got += n;
    if (got < want) break;
  }
  HFTA_CHECK(got == total,
             "IDX file '{}' is truncated: dimensions [{}] need {} payload bytes, but only {} are "
             "present; download or reinstall the file",
             path, fmt::join(out.dims, ", "), total, got);

  // Anything after the payload means the header and the data disagree.
  int64_t extra = 0;
  uint8_t sink[4096];
  while (int64_t n = read_some(f.get(), sink, sizeof(sink), path)) extra += n;
  HFTA_CHECK(extra == 0,
             "IDX file '{}' has {} bytes after its payload: dimensions [{}] account for {} "
             "payload bytes; the header does not match the data",
             path, extra, fmt::join(out.dims, ", "), total);
  return out;
}

}  // namespace hfta
