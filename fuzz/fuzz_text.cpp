// libFuzzer target: the input as a text corpus, read by load_text_files (the one file given) and
// by load_wikitext2 (as the training split, then as the validation split, of a folder whose other
// splits are valid).
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "core/error.h"
#include "datasets/text_corpus.h"
#include "fuzz/fuzz_input.h"
#include "tests/io/seed_workflow_files.h"

namespace {

// A WikiText-2 folder with valid splits, made once.
const std::string& wikitext_dir() {
  static const std::string dir = [] {
    const std::filesystem::path d = std::filesystem::path(hfta::fuzz::temp_dir()) / "wikitext";
    std::filesystem::create_directories(d);
    const std::string text = hfta::seeds::text_corpus_files()[0].second;
    for (const char* split : {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"})
      hfta::seeds::write_text(d / split, text);
    return d.string();
  }();
  return dir;
}

void read(const std::function<void()>& f) {
  try {
    f();
  } catch (const hfta::Error&) {
    // expected: the reader refused the file
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hfta::fuzz::write_input("corpus.txt", data, size);
  read([&] { hfta::load_text_files({path}); });
  const std::string dir = wikitext_dir();
  const std::string valid = hfta::seeds::text_corpus_files()[0].second;
  for (const char* split : {"wiki.train.tokens", "wiki.valid.tokens"}) {
    hfta::seeds::write_text(std::filesystem::path(dir) / split,
                            std::string(reinterpret_cast<const char*>(data), size));
    read([&] { hfta::load_wikitext2(dir); });
    hfta::seeds::write_text(std::filesystem::path(dir) / split, valid);
  }
  return 0;
}
