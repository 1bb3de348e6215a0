// Whether a test process runs under a sanitizer (scripts/sanitize.sh). The test files are compiled
// without instrumentation there, so CMake says it: HFTA_SANITIZER_ADDRESS or HFTA_SANITIZER_THREAD.
#pragma once

namespace hfta::test {

#if defined(HFTA_SANITIZER_ADDRESS) || defined(HFTA_SANITIZER_THREAD) || \
    defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Resident and peak memory measure the sanitizer, not the code: ASan keeps freed blocks in a
// quarantine (256 MiB by default) and maps shadow memory, TSan its own shadow and history.
inline constexpr bool kMemoryIsMeasurable = !kSanitized;

}  // namespace hfta::test
