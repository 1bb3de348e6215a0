#include "datasets/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "core/rng.h"
#include "datasets/dataset.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSplitMix = 0x7465787473000001ull;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n';
}

// The byte offset of the first byte that does not start a well-formed UTF-8 sequence (no
// overlong forms, surrogates or code points above U+10FFFF), or -1 when the text is valid.
int64_t invalid_utf8_offset(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return static_cast<int64_t>(i);
    for (int k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

// The whole file, checked to be non-empty UTF-8 text.
std::string read_text_file(const std::string& path) {
  std::error_code ec;
  HFTA_CHECK(fs::exists(path, ec), "text file '{}' does not exist", path);
  HFTA_CHECK(fs::is_regular_file(path, ec), "text file '{}' is not a regular file", path);
  check_file_fits_in_memory(path, "text file");
  std::ifstream in(path, std::ios::binary);
  HFTA_CHECK(in.good(), "cannot read text file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  HFTA_CHECK(!text.empty(), "text file '{}' is empty", path);
  const size_t nul = text.find('\0');
  HFTA_CHECK(nul == std::string::npos,
             "text file '{}' is binary: it has a NUL byte at byte offset {}; pass text files only",
             path, nul);
  const int64_t bad = invalid_utf8_offset(text);
  HFTA_CHECK(bad < 0,
             "text file '{}' is not valid UTF-8: byte 0x{:02x} at byte offset {} does not start a "
             "well-formed sequence; convert it (e.g. iconv -f latin1 -t utf-8)",
             path, static_cast<unsigned char>(text[bad]), bad);
  return text;
}

// Calls f(line) for every line of text ('\n'-separated; '\r' counts as whitespace).
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    f(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

// Appends the ids of the line's words and <eos>; nothing for a line without a word.
void tokenize_line(std::string_view line, Dictionary& dict, bool grow, int64_t* unknown,
                   std::vector<int32_t>& out) {
  const size_t before = out.size();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i == start) break;
    const std::string word(line.substr(start, i - start));
    int32_t id = grow ? dict.add(word) : dict.find(word);
    if (id < 0) {
      id = dict.add(kUnk);
      if (unknown) ++*unknown;
    }
    out.push_back(id);
  }
  if (out.size() > before) out.push_back(dict.add(kEos));
}

bool has_word(std::string_view line) {
  return std::any_of(line.begin(), line.end(), [](char c) { return !is_space(c); });
}

// fortune(6) separates entries by lines holding only '%'.
bool is_separator(std::string_view line) {
  while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
  return line == "%";
}

}  // namespace

int32_t Dictionary::add(const std::string& word) {
  const auto [it, fresh] = ids_.try_emplace(word, static_cast<int32_t>(words_.size()));
  if (fresh) words_.push_back(word);
  return it->second;
}

int32_t Dictionary::find(const std::string& word) const {
  const auto it = ids_.find(word);
  return it == ids_.end() ? -1 : it->second;
}

const std::vector<int32_t>& TextCorpus::split(const std::string& which) const {
  if (which == "train") return train;
  if (which == "valid") return valid;
  if (which == "test") return test;
  fail("corpus '{}' has no split '{}': expected train, valid or test", name, which);
}

std::vector<int32_t> tokenize(const std::string& text, Dictionary& dictionary, bool grow,
                              int64_t* unknown) {
  std::vector<int32_t> ids;
  for_each_line(
      text, [&](std::string_view line) { tokenize_line(line, dictionary, grow, unknown, ids); });
  return ids;
}

TextCorpus load_wikitext2(const std::string& dir) {
  std::error_code ec;
  HFTA_CHECK(fs::is_directory(dir, ec),
             "WikiText-2 directory '{}' does not exist: expected the unpacked wikitext-2 "
             "directory holding wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens",
             dir);
  TextCorpus corpus;
  corpus.name = "wikitext2";
  const auto read = [&](const char* name, bool grow, int64_t* unknown) {
    const std::string path = (fs::path(dir) / name).string();
    HFTA_CHECK(fs::exists(path, ec),
               "WikiText-2 file '{}' does not exist: expected the unpacked wikitext-2 directory "
               "holding wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens",
               path);
    std::vector<int32_t> ids = tokenize(read_text_file(path), corpus.dictionary, grow, unknown);
    HFTA_CHECK(!ids.empty(), "text file '{}' has no word", path);
    return ids;
  };
  // Training first: the dictionary is the training split's.
  corpus.train = read("wiki.train.tokens", true, nullptr);
  corpus.valid = read("wiki.valid.tokens", false, &corpus.unknown_valid);
  corpus.test = read("wiki.test.tokens", false, &corpus.unknown_test);
  return corpus;
}

std::vector<std::string> split_paths(const std::string& comma_separated) {
  std::vector<std::string> paths;
  std::stringstream ss(comma_separated);
  for (std::string p; std::getline(ss, p, ',');)
    if (!p.empty()) paths.push_back(p);
  return paths;
}

TextCorpus load_text_files(const std::vector<std::string>& paths, const TextFilesOptions& options) {
  HFTA_CHECK(!paths.empty(), "no text file given: pass --text-files a.txt,b.txt (or a directory)");
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& p : paths) {
    if (!fs::is_directory(p, ec)) {
      files.push_back(p);
      continue;
    }
    std::vector<std::string> inside;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (!e.is_symlink() && e.is_regular_file() && e.path().extension() != ".dat")
        inside.push_back(e.path().string());
    HFTA_CHECK(!inside.empty(), "text directory '{}' has no regular file", p);
    std::sort(inside.begin(), inside.end());
    files.insert(files.end(), inside.begin(), inside.end());
  }

  // Every file is read and checked first; the lines point into `texts`.
  std::vector<std::string> texts;
  std::vector<std::string_view> lines;
  for (const auto& path : files) {
    texts.push_back(read_text_file(path));
    const size_t before = lines.size();
    for_each_line(texts.back(), [&](std::string_view line) {
      if (has_word(line) && !is_separator(line)) lines.push_back(line);
    });
    HFTA_CHECK(lines.size() > before, "text file '{}' has no word", path);
  }
  const int64_t n = static_cast<int64_t>(lines.size());
  HFTA_CHECK(n >= 3,
             "text files {} hold {} line{} with words, need at least 3 (one each for training, "
             "validation and test)",
             fmt::join(files, ", "), n, n == 1 ? "" : "s");

  const int64_t n_valid = std::max<int64_t>(1, n / 20), n_test = std::max<int64_t>(1, n / 20);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  RngStream rng(options.seed ^ kSplitMix, 0);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[i], perm[static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)))]);
  enum : uint8_t { kTrain, kValid, kTest };
  std::vector<uint8_t> split_of(static_cast<size_t>(n), kTrain);
  for (int64_t k = 0; k < n_valid; ++k) split_of[perm[k]] = kValid;
  for (int64_t k = n_valid; k < n_valid + n_test; ++k) split_of[perm[k]] = kTest;

  TextCorpus corpus;
  corpus.name = files.size() == 1 ? fmt::format("text:{}", fs::path(files[0]).filename().string())
                                  : fmt::format("text:{}-files", files.size());
  for (int64_t i = 0; i < n; ++i)
    if (split_of[i] == kTrain)
      tokenize_line(lines[i], corpus.dictionary, true, nullptr, corpus.train);
  for (int64_t i = 0; i < n; ++i) {
    if (split_of[i] == kValid)
      tokenize_line(lines[i], corpus.dictionary, false, &corpus.unknown_valid, corpus.valid);
  }
  for (int64_t i = 0; i < n; ++i) {
    if (split_of[i] == kTest)
      tokenize_line(lines[i], corpus.dictionary, false, &corpus.unknown_test, corpus.test);
  }
  return corpus;
}

Batchified batchify(const std::vector<int32_t>& ids, int64_t streams, const std::string& name) {
  HFTA_CHECK(streams >= 1, "batchify '{}': the number of streams must be at least 1, got {}", name,
             streams);
  const int64_t n = static_cast<int64_t>(ids.size());
  HFTA_CHECK(n >= streams,
             "'{}' has {} tokens, fewer than the {} streams it is cut into: lower the batch size "
             "(streams)",
             name, n, streams);
  Batchified out;
  out.name = name;
  out.streams = streams;
  out.length = n / streams;
  out.data.assign(ids.begin(), ids.begin() + streams * out.length);
  return out;
}

BpttReader::BpttReader(Batchified data, int64_t bptt) : data_(std::move(data)), bptt_(bptt) {
  HFTA_CHECK(bptt >= 1, "bptt must be at least 1, got {}", bptt);
  HFTA_CHECK(data_.streams >= 1 && data_.length >= 1 &&
                 static_cast<int64_t>(data_.data.size()) == data_.streams * data_.length,
             "'{}' holds {} tokens for {} streams of {}: make it with batchify()", data_.name,
             data_.data.size(), data_.streams, data_.length);
  HFTA_CHECK(data_.length - 1 >= bptt,
             "bptt {} is longer than '{}': its {} streams hold {} tokens each, so a window has at "
             "most {} inputs with a next-token target; lower --bptt or the number of streams",
             bptt, data_.name, data_.streams, data_.length, data_.length - 1);
  windows_ = (data_.length - 1 + bptt - 1) / bptt;
}

TokenWindow BpttReader::make_window() const {
  TokenWindow w;
  w.streams = data_.streams;
  w.capacity = bptt_;
  w.input_data.resize(static_cast<size_t>(data_.streams * bptt_));
  w.target_data.resize(static_cast<size_t>(data_.streams * bptt_));
  return w;
}

int64_t BpttReader::next(const IndexView& inputs, const IndexView& targets) {
  const int64_t S = data_.streams;
  check_shape(inputs, Shape{S, bptt_}, "bptt input buffer");
  check_shape(targets, Shape{S, bptt_}, "bptt target buffer");
  if (window_ >= windows_) {
    window_ = 0;
    return 0;
  }
  const int64_t offset = window_ * bptt_;
  const int64_t T = std::min(bptt_, data_.length - 1 - offset);
  for (int64_t s = 0; s < S; ++s) {
    const int32_t* src = data_.stream(s) + offset;
    std::copy_n(src, T, inputs.data + s * T);
    std::copy_n(src + 1, T, targets.data + s * T);
  }
  ++window_;
  return T;
}

void BpttReader::seek(int64_t window) {
  HFTA_CHECK(window >= 0 && window < windows_, "window {} is outside the {} windows of '{}'",
             window, windows_, data_.name);
  window_ = window;
}

bool BpttReader::next(TokenWindow& window) {
  HFTA_CHECK(window.streams == data_.streams && window.capacity == bptt_ &&
                 static_cast<int64_t>(window.input_data.size()) == data_.streams * bptt_ &&
                 static_cast<int64_t>(window.target_data.size()) == data_.streams * bptt_,
             "window buffers hold {} streams x {} tokens, the reader over '{}' needs {} x {}: "
             "create them with BpttReader::make_window()",
             window.streams, window.capacity, data_.name, data_.streams, bptt_);
  window.length = next(IndexView(window.input_data.data(), Shape{data_.streams, bptt_}),
                       IndexView(window.target_data.data(), Shape{data_.streams, bptt_}));
  return window.length > 0;
}

}  // namespace hfta
