// `hfta --version`: what a bug report needs to say about a build.
#pragma once

#include <string>

namespace hfta {

// The version, the build's options (type, native ISA and the vector extensions it compiled for,
// CUDA, MPI, sanitizers) and the libraries it runs on, with their versions, one per line.
std::string version_text();

}  // namespace hfta
