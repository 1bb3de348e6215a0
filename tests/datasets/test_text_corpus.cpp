// Text corpora: small corpora written here give the dictionary in first-appearance order, <eos>
// at line ends, <unk> for unseen words, deterministic 90/5/5 line splits; batchify and BPTT
// windows match hand-worked examples; every bad input names the file (and byte offset).
#include <algorithm>
#include <fstream>
#include <functional>
#include <set>

#include "datasets/text_corpus.h"
#include "test_files.h"
#include "test_util.h"

namespace hfta {
using test::expect_error_containing_all;
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::vector<std::string> words_of(const TextCorpus& c, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(c.dictionary.word(id));
  return out;
}

using Words = std::vector<std::string>;

TEST(TextCorpus, DictionaryOrderEosAndUnk) {
  test::TempDir dir("text_wikitext");
  write(dir.path / "wiki.train.tokens", "a b a\n\n  \t \nc\tb \r\n");
  write(dir.path / "wiki.valid.tokens", "a d\ne\n");
  write(dir.path / "wiki.test.tokens", "b d");  // no final newline
  const TextCorpus c = load_wikitext2(dir.str());
  EXPECT_EQ(c.name, "wikitext2");
  // First appearance in training: a b <eos> c; then <unk>, added after every training word.
  EXPECT_EQ(c.dictionary.words(), (Words{"a", "b", "<eos>", "c", "<unk>"}));
  EXPECT_EQ(c.vocab_size(), 5);
  EXPECT_EQ(c.train, (std::vector<int32_t>{0, 1, 0, 2, 3, 1, 2}));
  EXPECT_EQ(words_of(c, c.valid), (Words{"a", "<unk>", "<eos>", "<unk>", "<eos>"}));
  EXPECT_EQ(words_of(c, c.test), (Words{"b", "<unk>", "<eos>"}));
  EXPECT_EQ(c.unknown_valid, 2);
  EXPECT_EQ(c.unknown_test, 1);
  EXPECT_EQ(&c.split("valid"), &c.valid);
  expect_error_containing_all([&] { c.split("dev"); }, {"no split 'dev'", "train, valid or test"});

  // <unk> in training (as WikiText-2 has it) keeps its place and nothing is added.
  write(dir.path / "wiki.train.tokens", "x <unk> y\n");
  const TextCorpus d = load_wikitext2(dir.str());
  EXPECT_EQ(d.dictionary.words(), (Words{"x", "<unk>", "y", "<eos>"}));
  EXPECT_EQ(d.valid, (std::vector<int32_t>{1, 1, 3, 1, 3}));
  EXPECT_EQ(d.dictionary.find("nope"), -1);
  // Valid and test words all known: no <unk> at all.
  write(dir.path / "wiki.train.tokens", "a b d e\n");
  EXPECT_EQ(load_wikitext2(dir.str()).dictionary.find("<unk>"), -1);
}

// 100 lines with words over two files, plus '%' separators and blank lines. Line i is
// "d<i/10> u<i%10>": every word occurs in 10 lines, so the words of the few validation and test
// lines are known from training, and the pair tells which line it was.
void write_lines(const fs::path& dir) {
  std::string a, b;
  for (int i = 0; i < 60; ++i)
    a += fmt::format("d{} u{}\n{}", i / 10, i % 10, i % 4 == 0 ? "%\n\n" : "");
  for (int i = 60; i < 100; ++i) b += fmt::format("d{} u{}\n%\n", i / 10, i % 10);
  write(dir / "a.txt", a);
  write(dir / "b.txt", b);
}

// The line numbers of a split's lines, in order.
std::vector<int> line_numbers(const TextCorpus& c, const std::vector<int32_t>& ids) {
  const Words words = words_of(c, ids);
  std::vector<int> out;
  for (size_t k = 0; k + 2 < words.size(); k += 3) {
    EXPECT_EQ(words[k + 2], "<eos>");
    out.push_back(std::stoi(words[k].substr(1)) * 10 + std::stoi(words[k + 1].substr(1)));
  }
  return out;
}

TEST(TextCorpus, TextFilesSplitByLineDeterministically) {
  test::TempDir dir("text_files");
  write_lines(dir.path);
  const std::vector<std::string> files = {(dir.path / "a.txt").string(),
                                          (dir.path / "b.txt").string()};
  const TextCorpus c = load_text_files(files, {.seed = 5});
  EXPECT_EQ(c.name, "text:2-files");
  EXPECT_EQ(c.dictionary.find("%"), -1);
  // 100 lines of 2 words + <eos>: 5 each to validation and test, 90 to training.
  EXPECT_EQ(c.train.size(), 270u);
  EXPECT_EQ(c.valid.size(), 15u);
  EXPECT_EQ(c.test.size(), 15u);
  const std::vector<int> tr = line_numbers(c, c.train), va = line_numbers(c, c.valid),
                         te = line_numbers(c, c.test);
  EXPECT_EQ(tr.size(), 90u);
  // Each split keeps the files' line order; together they hold every line once.
  EXPECT_TRUE(std::is_sorted(tr.begin(), tr.end()));
  EXPECT_TRUE(std::is_sorted(va.begin(), va.end()));
  EXPECT_TRUE(std::is_sorted(te.begin(), te.end()));
  std::set<int> all(tr.begin(), tr.end());
  all.insert(va.begin(), va.end());
  all.insert(te.begin(), te.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_EQ(c.unknown_valid + c.unknown_test, 0);
  EXPECT_EQ(c.dictionary.find("<unk>"), -1);

  // The same seed gives the same split, another seed another one.
  const TextCorpus again = load_text_files(files, {.seed = 5});
  EXPECT_EQ(again.train, c.train);
  EXPECT_EQ(again.valid, c.valid);
  EXPECT_EQ(again.dictionary.words(), c.dictionary.words());
  const TextCorpus other = load_text_files(files, {.seed = 6});
  EXPECT_NE(line_numbers(other, other.valid), va);

  // A directory stands for its regular files sorted by name, without *.dat and symbolic links.
  write(dir.path / "a.dat", std::string("\0\0\0\2", 4));
  fs::create_symlink(dir.path / "a.txt", dir.path / "c.u8");
  const TextCorpus from_dir = load_text_files({dir.str()}, {.seed = 5});
  EXPECT_EQ(from_dir.train, c.train);
  EXPECT_EQ(from_dir.test, c.test);
  EXPECT_EQ(split_paths("a,b,,c"), (std::vector<std::string>{"a", "b", "c"}));

  // Three lines are enough: one per split.
  write(dir.path / "three.txt", "x\n%\ny\n\nz\n");
  const TextCorpus three = load_text_files({(dir.path / "three.txt").string()});
  EXPECT_EQ(three.name, "text:three.txt");
  EXPECT_EQ(three.train.size(), 2u);
  EXPECT_EQ(three.valid.size(), 2u);
  EXPECT_EQ(three.test.size(), 2u);
  write(dir.path / "two.txt", "x\n%\ny\n");
  expect_error_containing_all([&] { load_text_files({(dir.path / "two.txt").string()}); },
                              {"two.txt", "2 lines with words", "at least 3"});
}

TEST(TextCorpus, BatchifyByHand) {
  std::vector<int32_t> ids(11);
  for (int i = 0; i < 11; ++i) ids[i] = i;
  const Batchified b = batchify(ids, 3, "toy");
  EXPECT_EQ(b.streams, 3);
  EXPECT_EQ(b.length, 3);
  EXPECT_EQ(b.data, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));  // 9 and 10 dropped
  EXPECT_EQ(b.stream(2)[0], 6);
  EXPECT_EQ(batchify(ids, 11).length, 1);
  expect_error_containing_all([&] { batchify(ids, 12, "toy valid"); },
                              {"'toy valid' has 11 tokens", "fewer than the 12 streams"});
  expect_error_containing_all([&] { batchify(ids, 0); }, {"at least 1, got 0"});
}

TEST(TextCorpus, WindowsByHand) {
  std::vector<int32_t> ids(21);
  for (int i = 0; i < 21; ++i) ids[i] = i;
  // Streams [0..9] and [10..19] (20 dropped); 9 targets per stream: windows of 4, 4 and 1.
  BpttReader reader(batchify(ids, 2, "toy"), 4);
  EXPECT_EQ(reader.windows_per_pass(), 3);
  EXPECT_EQ(reader.tokens_per_pass(), 9);
  TokenWindow w = reader.make_window();
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE(reader.next(w));
    EXPECT_EQ(w.length, 4);
    EXPECT_EQ(w.inputs().shape, (Shape{2, 4}));
    EXPECT_EQ(w.input_data, (std::vector<int32_t>{0, 1, 2, 3, 10, 11, 12, 13}));
    EXPECT_EQ(w.target_data, (std::vector<int32_t>{1, 2, 3, 4, 11, 12, 13, 14}));
    ASSERT_TRUE(reader.next(w));
    EXPECT_EQ(w.input_data, (std::vector<int32_t>{4, 5, 6, 7, 14, 15, 16, 17}));
    EXPECT_EQ(w.target_data, (std::vector<int32_t>{5, 6, 7, 8, 15, 16, 17, 18}));
    // The short last window is [2, 1] row-major at the front of the buffers.
    ASSERT_TRUE(reader.next(w));
    EXPECT_EQ(w.length, 1);
    EXPECT_EQ(w.targets().shape, (Shape{2, 1}));
    EXPECT_EQ(w.inputs().data[0], 8);
    EXPECT_EQ(w.inputs().data[1], 18);
    EXPECT_EQ(w.targets().data[0], 9);
    EXPECT_EQ(w.targets().data[1], 19);
    EXPECT_FALSE(reader.next(w));  // end of the pass, rewound
    EXPECT_EQ(reader.window_index(), 0);
  }
  // bptt dividing the targets exactly: no short window.
  BpttReader exact(batchify(ids, 2), 3);
  EXPECT_EQ(exact.windows_per_pass(), 3);
  // The largest bptt: one window with every target; one more is an error.
  EXPECT_EQ(BpttReader(batchify(ids, 2), 9).windows_per_pass(), 1);
  expect_error_containing_all([&] { BpttReader(batchify(ids, 2, "toy test"), 10); },
                              {"bptt 10 is longer than 'toy test'", "2 streams hold 10 tokens",
                               "at most 9", "lower --bptt"});
  expect_error_containing_all([&] { BpttReader(batchify(ids, 2), 0); },
                              {"bptt must be at least 1"});
  TokenWindow wrong = BpttReader(batchify(ids, 2), 3).make_window();
  expect_error_containing_all([&] { reader.next(wrong); },
                              {"2 streams x 3 tokens", "needs 2 x 4", "make_window"});
}

TEST(TextCorpus, BadFilesNameFileAndOffset) {
  test::TempDir dir("text_errors");
  const auto p = [&](const std::string& name) { return (dir.path / name).string(); };
  const auto load = [&](const std::string& name) { return load_text_files({p(name)}); };
  expect_error_containing_all([&] { load("missing.txt"); }, {p("missing.txt"), "does not exist"});
  write(dir.path / "empty.txt", "");
  expect_error_containing_all([&] { load("empty.txt"); }, {p("empty.txt"), "is empty"});
  write(dir.path / "blank.txt", " \n%\n\t\n");
  expect_error_containing_all([&] { load("blank.txt"); }, {p("blank.txt"), "has no word"});
  write(dir.path / "binary.bin", std::string("abc\ndef\0gh", 10));
  expect_error_containing_all([&] { load("binary.bin"); },
                              {p("binary.bin"), "binary", "NUL byte at byte offset 7"});
  // Valid UTF-8 of every length passes: é (2 bytes), 中 (3), U+10FFFF (4).
  write(dir.path / "utf8.txt", "caf\xc3\xa9\n\xe4\xb8\xad\n\xf4\x8f\xbf\xbf\n");
  // One line per split: the training word, <eos>, and <unk> for the other two.
  EXPECT_EQ(load("utf8.txt").dictionary.words().at(1), "<eos>");
  EXPECT_EQ(load("utf8.txt").vocab_size(), 3);
  // Invalid: a lone continuation byte, an overlong '/', a surrogate, a code point above
  // U+10FFFF, Latin-1 é, a sequence cut short by the end of the file.
  const std::vector<std::pair<std::string, int>> bad = {
      {"ab\n\x80", 3},           {"ab \xc0\xaf", 3},     {"\xed\xa0\x80", 0},
      {"xy\xf4\x90\x80\x80", 2}, {"caf\xe9 au lait", 3}, {"ok\n\xe4\xb8", 3}};
  for (const auto& [bytes, offset] : bad) {
    write(dir.path / "bad.txt", bytes);
    expect_error_containing_all([&] { load("bad.txt"); }, {p("bad.txt"), "not valid UTF-8",
                                                           fmt::format("byte offset {}", offset)});
  }
  expect_error_containing_all([&] { load_text_files({}); }, {"no text file given"});
  expect_error_containing_all([&] { load_text_files({dir.str() + "/sub"}); },
                              {"sub", "does not exist"});
  fs::create_directories(dir.path / "none");
  expect_error_containing_all([&] { load_text_files({p("none")}); },
                              {p("none"), "no regular file"});

  // WikiText-2: a missing directory or file, and the same checks per file.
  expect_error_containing_all([&] { load_wikitext2(p("wt2")); },
                              {p("wt2"), "does not exist", "wiki.train.tokens"});
  fs::create_directories(dir.path / "wt2");
  write(dir.path / "wt2" / "wiki.train.tokens", "a b\n");
  write(dir.path / "wt2" / "wiki.valid.tokens", "a\n");
  expect_error_containing_all([&] { load_wikitext2(p("wt2")); },
                              {(dir.path / "wt2" / "wiki.test.tokens").string(), "does not exist"});
  write(dir.path / "wt2" / "wiki.test.tokens", "\n \n");
  expect_error_containing_all([&] { load_wikitext2(p("wt2")); },
                              {(dir.path / "wt2" / "wiki.test.tokens").string(), "has no word"});
  write(dir.path / "wt2" / "wiki.test.tokens", std::string("a\0", 2));
  expect_error_containing_all([&] { load_wikitext2(p("wt2")); },
                              {"wiki.test.tokens", "byte offset 1"});
}

// Debian's fortunes, when installed (apt-get install fortunes-min fortunes): the real-text case.
TEST(TextCorpus, DebianFortunes) {
  const std::string dir = "/usr/share/games/fortunes";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " is missing: apt-get install fortunes";
  const TextCorpus c = load_text_files({dir}, {.seed = 1});
  std::printf(
      "fortunes: vocabulary %lld, tokens train %zu valid %zu test %zu, <unk> valid %lld "
      "test %lld\n",
      static_cast<long long>(c.vocab_size()), c.train.size(), c.valid.size(), c.test.size(),
      static_cast<long long>(c.unknown_valid), static_cast<long long>(c.unknown_test));
  EXPECT_GT(c.vocab_size(), 1000);
  EXPECT_NE(c.dictionary.find("<unk>"), -1);
  // No separator line became a line of its own ("%" occurs inside fortunes, though).
  const int32_t eos = c.dictionary.find("<eos>"), percent = c.dictionary.find("%");
  for (size_t k = 0; k + 2 < c.train.size(); ++k)
    ASSERT_FALSE(c.train[k] == eos && c.train[k + 1] == percent && c.train[k + 2] == eos) << k;
  const double valid_share = static_cast<double>(c.valid.size()) / c.train.size();
  EXPECT_NEAR(valid_share, 0.05 / 0.9, 0.01);
  BpttReader reader(batchify(c.train, 20, "fortunes train"), 35);
  EXPECT_GT(reader.windows_per_pass(), 10);
}

}  // namespace
}  // namespace hfta
