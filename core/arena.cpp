#include "core/arena.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "core/device_memory.h"
#include "core/parallel.h"

namespace hfta {

namespace {

// The first number in `path` (a cgroup file holds one, or "max"); nullopt if there is none.
std::optional<size_t> read_number(const char* path) {
  std::ifstream in(path);
  size_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

std::string gib(size_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / static_cast<double>(1 << 30));
}

}  // namespace

size_t available_memory_bytes() {
  size_t available = std::numeric_limits<size_t>::max();
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line))
    if (line.starts_with("MemAvailable:")) {
      std::istringstream fields(line.substr(13));
      size_t kib = 0;
      if (fields >> kib) available = kib << 10;
      break;
    }
  // cgroup v2, as a container or a systemd unit sees itself.
  const std::optional<size_t> limit = read_number("/sys/fs/cgroup/memory.max");
  const std::optional<size_t> used = read_number("/sys/fs/cgroup/memory.current");
  if (limit && used) available = std::min(available, *limit > *used ? *limit - *used : 0);
  return available;
}

void check_memory_available(size_t bytes, const std::string& what, const std::string& advice) {
  const size_t available = available_memory_bytes();
  if (available == std::numeric_limits<size_t>::max()) return;
  if (bytes <= available && available - bytes >= kMemoryHeadroom) return;
  throw OutOfMemory(fmt::format("{}: {} needed, but this machine has {} available (and keeps {} "
                                "MiB for the rest): {}",
                                what, gib(bytes), gib(available), kMemoryHeadroom >> 20, advice),
                    bytes);
}

// Arenas of 2 MiB or more are 2 MiB-aligned and asked for transparent huge pages (the kernel's
// THP mode is usually "madvise"). The optimizer streams every parameter, gradient and moment
// each step, one model's several MB at a time, and with 4 KiB pages that is a TLB miss every
// 4 KiB. On the paravirtualized dev machines those misses cost much more when two threads of
// one process stream at once than when two processes do: Adam's update of the MLP ran 2.5x
// slower per model inside a threads plan than in a process of its own, and about the same with
// huge pages (docs/benchmarks.md).
Arena::Arena(size_t bytes, std::string name, Device device)
    : capacity_(align_up(bytes)), name_(std::move(name)), device_(device) {
  if (capacity_ == 0) capacity_ = kAlignment;
  if (device_ == Device::kCuda) {  // zeroed by the allocation
    base_ = std::unique_ptr<std::byte, Free>(
        allocate_device_memory(capacity_, fmt::format("the {} arena", name_)), Free{device_});
    return;
  }
  // Small arenas skip reading /proc: a model's big ones were checked together (Net::finalize).
  if (capacity_ >= kCheckedArenaBytes)
    check_memory_available(capacity_, fmt::format("the {} arena", name_),
                           "reduce B or the batch size");
  const bool huge = capacity_ >= kHugePage;
  const size_t allocated = huge ? (capacity_ + kHugePage - 1) / kHugePage * kHugePage : capacity_;
  void* p = std::aligned_alloc(huge ? kHugePage : kAlignment, allocated);
  if (huge && p != nullptr) madvise(p, allocated, MADV_HUGEPAGE);
  HFTA_CHECK(p != nullptr, "could not allocate {} bytes for {}: reduce B or the batch size",
             capacity_, name_);
  base_.reset(static_cast<std::byte*>(p));
  zero();
}

// Spread over the threads: one thread's stores reach about half the memory bandwidth, and the
// gradient arena, which is zeroed every step, reaches a hundred MB at LeNet B=8 (see
// docs/benchmarks.md, 'Measurements behind code choices').
void Arena::zero() {
  if (!base_) return;
  if (device_ != Device::kCpu) return zero_memory(device_, base_.get(), capacity_);
  std::byte* base = base_.get();
  for_each_chunk(static_cast<int64_t>(capacity_), [&](int64_t begin, int64_t end) {
    std::memset(base + begin, 0, static_cast<size_t>(end - begin));
  });
}

void Arena::copy_from(const Arena& other) {
  HFTA_CHECK(!counting() && !other.counting() && capacity_ == other.capacity_,
             "copying the {} arena ({} bytes) into the {} arena ({} bytes): they need one size",
             other.name_, other.capacity_, name_, capacity_);
  copy_memory(base_.get(), device_, other.base_.get(), other.device_, capacity_);
}

void Arena::Free::operator()(std::byte* p) const {
  if (device == Device::kCpu)
    std::free(p);
  else
    free_device_memory(p);
}

}  // namespace hfta
