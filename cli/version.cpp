#include "cli/version.h"

#include <fmt/format.h>
#include <png.h>
#include <zlib.h>

#include <CLI/Version.hpp>
#include <nlohmann/json.hpp>
#include <string_view>

#include "backend/cpu/runtime.h"

#if HFTA_HAVE_MPI
#include <mpi.h>
#endif

#ifndef HFTA_VERSION
#define HFTA_VERSION "unknown"
#endif

namespace hfta {

namespace {

// The widest vector extension the compiler targeted: the ISA the kernels run on (a binary built
// with -march=native on an AVX-512 machine does not run on one without it).
const char* compiled_vector_isa() {
#if defined(__AVX512F__)
  return "AVX-512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "AVX2 + FMA";
#elif defined(__AVX2__)
  return "AVX2";
#elif defined(__AVX__)
  return "AVX";
#else
  return "SSE2";
#endif
}

std::string mpi_line() {
#if HFTA_HAVE_MPI
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(library, &length);  // callable before MPI_Init
  std::string text(library, static_cast<size_t>(length));
  if (const size_t end = text.find_first_of(",\n"); end != std::string::npos) text.resize(end);
  return fmt::format("on ({}): `mpirun -np K hfta tune` spreads trials", text);
#else
  return "off (hfta tune runs in one process; apt-get install libopenmpi-dev and rebuild)";
#endif
}

// What the CUDA backend is compiled for; asks no driver (--version stays instant on a machine
// without a GPU).
std::string cuda_line() {
#if HFTA_BUILD_CUDA && defined(HFTA_BUILD_CUDA_VERSION)
  return fmt::format(
      "on (compiled against CUDA runtime {}, for sm_{}; kernels: linear, relu; docs/cuda.md)",
      HFTA_BUILD_CUDA_VERSION, HFTA_BUILD_CUDA_ARCHITECTURES);
#else
  return "off (CPU only; configure with -DHFTA_CUDA=ON to build it)";
#endif
}

}  // namespace

std::string version_text() {
  std::string text = fmt::format("hfta {}\n", HFTA_VERSION);
#ifdef __clang__
  const char* compiler = "clang";
#else
  const char* compiler = "GCC";
#endif
  text += fmt::format("build: {}, compiled by {} {}\n", HFTA_BUILD_TYPE, compiler, __VERSION__);
  text += fmt::format("native ISA: {} (vector code for {})\n",
                      HFTA_BUILD_NATIVE ? "on, -march=native" : "off", compiled_vector_isa());
  text += fmt::format("CUDA backend: {}\n", cuda_line());
  text += fmt::format("MPI: {}\n", mpi_line());
  const std::string_view sanitize = HFTA_BUILD_SANITIZE;
  text += fmt::format("sanitizers: {}\n", sanitize == "address" || sanitize == "ON"
                                              ? "address, undefined"
                                          : sanitize == "thread" ? "thread"
                                                                 : "off");
  text += fmt::format("math libraries: {}\n", cpu::describe_gemm_libraries());
#ifdef _OPENMP
  text += fmt::format("OpenMP: {}\n", _OPENMP);
#endif
  text += fmt::format("fmt {}.{}.{}, CLI11 {}, nlohmann-json {}.{}.{}, zlib {}, libpng {}\n",
                      FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100,
                      CLI11_VERSION, NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                      NLOHMANN_JSON_VERSION_PATCH, zlibVersion(), png_get_libpng_ver(nullptr));
  text.pop_back();  // the caller ends the last line
  return text;
}

}  // namespace hfta
