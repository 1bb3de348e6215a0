#include "io/csv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <type_traits>

#include "core/error.h"

namespace hfta {

std::string csv_escape(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  HFTA_CHECK(!quoted, "CSV line has an unclosed quote: {}", line);
  return fields;
}

namespace {
std::string join_row(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    line += csv_escape(fields[i]);
  }
  return line;
}
}  // namespace

CsvWriter::CsvWriter(const std::string& path, const std::vector<std::string>& header, bool append)
    : path_(path), columns_(header.size()) {
  if (path.empty()) return;  // writes nowhere
  bool write_header = true;
  if (append) {
    std::ifstream in(path);
    std::string first;
    if (in && std::getline(in, first)) {
      HFTA_CHECK(csv_split(first) == header,
                 "{} has columns [{}] but this run writes [{}]: choose another --out directory",
                 path, first, fmt::join(header, ","));
      write_header = false;
    }
  }
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  HFTA_CHECK(file_ != nullptr, "cannot write {}: {}", path, std::strerror(errno));
  if (write_header) row(header);
}

CsvWriter::~CsvWriter() {
  if (file_) std::fclose(file_);
}

void CsvWriter::row(const std::vector<std::string>& fields) {
  HFTA_CHECK(fields.size() == columns_, "{}: a row has {} fields but the header has {}", path_,
             fields.size(), columns_);
  if (file_ == nullptr) return;
  std::string line = join_row(fields) + '\n';
  HFTA_CHECK(
      std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0,
      "cannot write {}: {}", path_, std::strerror(errno));
}

size_t CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  fail("{}: no column '{}' among [{}]", path, name, fmt::join(header, ","));
}

namespace {
template <typename T>
T parse_field(const CsvTable& t, size_t row, size_t column, const char* what) {
  const std::string& field = t.rows.at(row).at(column);
  T value{};
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  bool ok = ec == std::errc() && end == field.data() + field.size();
  if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(value);
  HFTA_CHECK(ok, "{} line {}, column {} ({}): '{}' is not {}", t.path, t.line_numbers.at(row),
             column + 1, t.header.at(column), field, what);
  return value;
}
}  // namespace

double CsvTable::number(size_t row, size_t column) const {
  return parse_field<double>(*this, row, column, "a number");
}

int64_t CsvTable::integer(size_t row, size_t column) const {
  return parse_field<int64_t>(*this, row, column, "an integer");
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path);
  HFTA_CHECK(in.good(), "cannot read {}: {}", path, std::strerror(errno));
  CsvTable table;
  table.path = path;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    const int64_t first_line = ++line_no;
    // A quoted field may hold line breaks (csv_escape writes them as they are): while the
    // quotes are unbalanced, the record goes on in the next line.
    bool open_quote = std::count(line.begin(), line.end(), '"') % 2 == 1;
    for (std::string more; open_quote && std::getline(in, more); ++line_no) {
      open_quote ^= std::count(more.begin(), more.end(), '"') % 2 == 1;
      line += '\n';
      line += more;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> fields;
    try {
      fields = csv_split(line);
    } catch (const Error& e) {
      fail("{} line {}: {}", path, first_line, e.what());
    }
    if (table.header.empty()) {
      table.header = std::move(fields);
      continue;
    }
    HFTA_CHECK(fields.size() == table.header.size(), "{} line {}: {} fields, header has {}", path,
               first_line, fields.size(), table.header.size());
    table.rows.push_back(std::move(fields));
    table.line_numbers.push_back(first_line);
  }
  HFTA_CHECK(!table.header.empty(), "{} is empty: expected a CSV header", path);
  return table;
}

}  // namespace hfta
