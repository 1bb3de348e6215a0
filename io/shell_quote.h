// Command lines that hfta prints for the user to run (retrain commands) or runs itself (gnuplot,
// python3): one argument as a POSIX shell word.
#pragma once

#include <string>

namespace hfta {

// `s` as is when it holds only characters no shell treats specially, else in single quotes.
inline std::string quote_arg(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=:,+") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace hfta
