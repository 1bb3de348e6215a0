// CSV files the workflows write (metrics, summaries, sweep results): RFC 4180 quoting, one
// header, and a flush after every row so an interrupted run keeps every row written so far.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace hfta {

// Quotes a field when it holds a comma, a quote or a line break (quotes doubled inside).
std::string csv_escape(const std::string& field);
// Splits one CSV line into fields, undoing csv_escape. Throws hfta::Error on an unclosed quote.
std::vector<std::string> csv_split(const std::string& line);

class CsvWriter {
 public:
  // Creates (truncates) `path` and writes the header; with `append`, keeps an existing file whose
  // header equals `header` (throws hfta::Error naming the file if it differs) and adds rows.
  // An empty path writes nowhere (rows are still checked): an array whose metrics no one reads,
  // as `hfta tune`'s.
  CsvWriter(const std::string& path, const std::vector<std::string>& header, bool append = false);
  ~CsvWriter();
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;

  // Writes one row (as many fields as the header, else hfta::Error) and flushes it.
  void row(const std::vector<std::string>& fields);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  size_t columns_;
  std::FILE* file_ = nullptr;
};

// A whole CSV file: header and rows (for tests and for reading results back).
struct CsvTable {
  std::string path;  // where it was read from
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> line_numbers;  // the file's line (from 1) of each row
  // Index of column `name`; throws hfta::Error naming the file's columns when absent.
  size_t column(const std::string& name) const;
  // The field at (row, column) as a number: the whole field, finite. Throws hfta::Error naming
  // the file, line and column of a field that is not one.
  double number(size_t row, size_t column) const;
  int64_t integer(size_t row, size_t column) const;
};
// Throws hfta::Error naming the file when it cannot be read or a row's width differs.
CsvTable read_csv(const std::string& path);

}  // namespace hfta
