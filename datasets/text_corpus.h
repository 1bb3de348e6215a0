// Word-level text corpora for language models, built as PyTorch's examples/word_language_model
// builds them, and the batchify / BPTT windows that feed them.
//
//   V  vocabulary size        S  streams (PyTorch's batch size: parallel token streams)
//   T  window length (bptt; the last window of a pass may be shorter)
//
// Tokens: each line is split on ASCII whitespace (space, \t, \r, \v, \f) and "<eos>" is appended
// at its end. Lines without a word are skipped (PyTorch would emit a lone <eos> for them). The
// Dictionary numbers words in order of first appearance in the training split. Words of the
// validation and test splits that the training split lacks become "<unk>"; when "<unk>" is needed
// and the training split does not contain it, it is added once, after every training word (id V-1),
// so training ids never depend on the other splits. (WikiText-2 already has <unk> in training.)
//
// Sources:
//   load_wikitext2(dir): wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens.
//   load_text_files(paths): any UTF-8 text files, read in the order given and concatenated line
//     by line; lines that are exactly "%" (the separator of fortune(6) files) are dropped. A
//     seeded shuffle of the line indices assigns 5% of the lines (at least 1) to validation, 5%
//     (at least 1) to test and the rest to training; inside each split lines keep their file
//     order, so the lines of one fortune that land in one split stay together. A directory
//     stands for its regular files (not symbolic links), sorted by name, except "*.dat"
//     (fortune's strfile indexes): /usr/share/games/fortunes is one argument.
//
// Windows: batchify(ids, S) cuts the token stream into S contiguous streams of len = n / S
// tokens (the remainder dropped), stored [S, len] row-major (PyTorch stores the transpose,
// [len, S]). A pass reads windows at offsets 0, T, 2T, ... of every stream: input [S, T] =
// stream[s][o .. o+T), target [S, T] = stream[s][o+1 .. o+T+1). The last window holds the
// len - 1 - o remaining tokens when fewer than T remain; it is kept, written as [S, T'] row-major
// in the front of the fixed [S, T] buffers (PyTorch keeps it too).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace hfta {

class Dictionary {
 public:
  // The id of `word`, adding it when new.
  int32_t add(const std::string& word);
  // The id of `word`, or -1.
  int32_t find(const std::string& word) const;
  const std::string& word(int32_t id) const { return words_.at(static_cast<size_t>(id)); }
  int64_t size() const { return static_cast<int64_t>(words_.size()); }
  const std::vector<std::string>& words() const { return words_; }

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> ids_;
};

inline constexpr const char* kEos = "<eos>";
inline constexpr const char* kUnk = "<unk>";

struct TextCorpus {
  std::string name;
  Dictionary dictionary;
  std::vector<int32_t> train, valid, test;      // token ids
  int64_t unknown_valid = 0, unknown_test = 0;  // words mapped to <unk> (absent from training)

  int64_t vocab_size() const { return dictionary.size(); }
  // "train" / "valid" / "test".
  const std::vector<int32_t>& split(const std::string& which) const;
};

// Throws hfta::Error naming the file for: a missing file, an empty file (or one without a word),
// a binary file (a NUL byte, with its offset), invalid UTF-8 (with the byte offset), a file
// larger than the memory available.
TextCorpus load_wikitext2(const std::string& dir);

struct TextFilesOptions {
  uint64_t seed = 0;  // the line shuffle that assigns lines to splits
};

// Same errors as load_wikitext2, and: fewer than 3 lines with words in all files together.
TextCorpus load_text_files(const std::vector<std::string>& paths,
                           const TextFilesOptions& options = {});

// Splits a comma-separated --text-files value ("a.txt,b.txt") into paths.
std::vector<std::string> split_paths(const std::string& comma_separated);

// The token ids of `text` (one file's contents), tokenized as above against `dictionary`: when
// `grow` is set, new words are added; otherwise they become <unk> (added when needed), counted
// in *unknown.
std::vector<int32_t> tokenize(const std::string& text, Dictionary& dictionary, bool grow,
                              int64_t* unknown = nullptr);

// S streams of a split: [S, len] row-major, len = ids.size() / S.
struct Batchified {
  std::string name;  // for errors, e.g. "wikitext2 valid"
  std::vector<int32_t> data;
  int64_t streams = 0, length = 0;
  const int32_t* stream(int64_t s) const { return data.data() + s * length; }
};

// Throws hfta::Error when the split has fewer tokens than streams.
Batchified batchify(const std::vector<int32_t>& ids, int64_t streams,
                    const std::string& name = "corpus");

// Fixed-capacity window buffers ([S, T] each), sized once by BpttReader::make_window().
struct TokenWindow {
  std::vector<int32_t> input_data, target_data;
  int64_t streams = 0, capacity = 0;  // S, T
  int64_t length = 0;                 // T' of the last next(): T, or fewer in the last window

  // [S, T'] row-major: the part of the buffers the last next() filled.
  IndexView inputs() { return IndexView(input_data.data(), Shape{streams, length}); }
  IndexView targets() { return IndexView(target_data.data(), Shape{streams, length}); }
};

// Reads the windows of a Batchified split in order, one pass after another:
//   BpttReader reader(batchify(corpus.train, 20, "train"), 35);
//   TokenWindow w = reader.make_window();
//   while (reader.next(w)) step(w.inputs(), w.targets());   // one pass
class BpttReader {
 public:
  // Throws hfta::Error when bptt < 1 or the split is too short for one full window
  // (length - 1 < bptt: lower --bptt or the stream count). `data` is copied.
  BpttReader(Batchified data, int64_t bptt);

  TokenWindow make_window() const;
  // Fills the next window of the pass and returns true; at the end of the pass returns false and
  // rewinds, so `while (reader.next(w))` reads exactly one pass.
  bool next(TokenWindow& window);
  // Same, into views [S, T] (S = streams, T = bptt), written as [S, T'] row-major in their
  // front. Returns T', 0 at the end of the pass.
  int64_t next(const IndexView& inputs, const IndexView& targets);
  void restart() { window_ = 0; }
  // The next window read is `window` of the pass (in [0, windows_per_pass())).
  void seek(int64_t window);

  int64_t windows_per_pass() const { return windows_; }
  // Targets per pass and stream: length - 1.
  int64_t tokens_per_pass() const { return data_.length - 1; }
  int64_t window_index() const { return window_; }
  int64_t bptt() const { return bptt_; }
  const Batchified& data() const { return data_; }

 private:
  Batchified data_;
  int64_t bptt_ = 0;
  int64_t windows_ = 0;
  int64_t window_ = 0;
};

}  // namespace hfta
