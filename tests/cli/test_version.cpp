// `hfta --version`: the version, the build's options and the libraries, and exit 0 without a
// subcommand.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "test_files.h"

namespace hfta {
namespace {

TEST(Version, NamesTheVersionTheBuildAndTheLibraries) {
  const test::CommandResult r = test::run_hfta("--version");
  EXPECT_EQ(r.exit_code, 0) << r.output();
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("^hfta [0-9]+[.][0-9]+"))) << r.out;
  for (const std::string& part :
       {std::string("build: "), std::string("native ISA: "), std::string("CUDA backend: "),
        std::string("MPI: "), std::string("sanitizers: "), std::string("OpenBLAS "),
        std::string("oneDNN "), std::string("fmt "), std::string("libpng ")})
    EXPECT_NE(r.out.find(part), std::string::npos) << "no '" << part << "' in:\n" << r.out;
}

TEST(Version, IsAFlagOfTheCommandNotOfASubcommand) {
  test::expect_hfta_error("train --version", "--version");
}

}  // namespace
}  // namespace hfta
