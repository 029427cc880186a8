//===- Flags.cpp - command lines from one table ---------------------------===//
#include "unroll/tooling/Flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace unroll;

namespace {
/// The column where a flag's help starts in --help.
constexpr size_t kHelpColumn = 25;

std::vector<std::string> splitNames(const std::string &names) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < names.size()) {
    size_t c = names.find(", ", pos);
    out.push_back(names.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos)
      break;
    pos = c + 2;
  }
  return out;
}
} // namespace

FlagTable::FlagTable(std::string tool, std::string synopsis, std::string intro)
    : tool_(std::move(tool)), synopsis_(std::move(synopsis)), intro_(std::move(intro)) {}

FlagTable &FlagTable::section(const std::string &title) {
  entries_.push_back({Entry::Section, {}, title, "", "", nullptr, nullptr});
  return *this;
}

FlagTable &FlagTable::text(const std::string &laidOut) {
  entries_.push_back({Entry::Text, {}, laidOut, "", "", nullptr, nullptr});
  return *this;
}

FlagTable &FlagTable::flag(const std::string &names, const std::string &help,
                           std::function<void()> set) {
  entries_.push_back({Entry::Flag, splitNames(names), names, "", help, std::move(set), nullptr});
  return *this;
}

FlagTable &FlagTable::option(const std::string &names, const std::string &metavar,
                             const std::string &help, Setter set) {
  entries_.push_back(
      {Entry::Flag, splitNames(names), names, metavar, help, nullptr, std::move(set)});
  return *this;
}

const FlagTable::Entry *FlagTable::find(const std::string &name) const {
  for (const Entry &e : entries_)
    for (const std::string &n : e.names)
      if (n == name)
        return &e;
  return nullptr;
}

bool FlagTable::parse(int argc, char **argv, std::vector<std::string> &positional,
                      std::string &err) const {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.empty() || a[0] != '-' || a == "-") {
      positional.push_back(a);
      continue;
    }
    const Entry *e = find(a);
    if (!e) {
      err = "unknown option '" + a + "' (see --help)";
      return false;
    }
    if (e->onSwitch) {
      e->onSwitch();
      continue;
    }
    if (i + 1 >= argc) {
      err = a + " expects a value";
      return false;
    }
    if (!e->onValue(argv[++i], err))
      return false;
  }
  return true;
}

std::string FlagTable::usage() const {
  std::string out = "usage: " + synopsis_ + "\n";
  if (!intro_.empty())
    out += "\n" + intro_ + "\n";
  out += "\n";
  std::string indent(kHelpColumn, ' ');
  for (const Entry &e : entries_) {
    if (e.kind == Entry::Section) {
      out += (out.compare(out.size() - 2, 2, "\n\n") == 0 ? "" : "\n") + e.label + ":\n";
    } else if (e.kind == Entry::Text) {
      out += e.label + "\n";
    } else {
      // "  --name META" then the help from column kHelpColumn (on the next
      // line when the name is too long); the help's own lines indented.
      std::string line = "  " + e.label + (e.metavar.empty() ? "" : " " + e.metavar);
      line +=
          line.size() < kHelpColumn ? std::string(kHelpColumn - line.size(), ' ') : "\n" + indent;
      for (char c : e.help)
        line += c == '\n' ? "\n" + indent : std::string(1, c);
      out += line + "\n";
    }
  }
  return out;
}

bool FlagTable::wantsHelp(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
      return true;
  return false;
}

bool unroll::parseInteger(const std::string &flag, const std::string &value, int64_t lo,
                          int64_t &out, std::string &err) {
  char *end = nullptr;
  errno = 0;
  long long x = strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || errno || x < lo) {
    err = flag + " expects an integer >= " + std::to_string(lo) + ", got '" + value + "'";
    return false;
  }
  out = x;
  return true;
}

bool unroll::parsePositive(const std::string &flag, const std::string &value, double &out,
                           std::string &err) {
  char *end = nullptr;
  double x = strtod(value.c_str(), &end);
  if (value.empty() || *end || !std::isfinite(x) || x <= 0) {
    err = flag + " expects a positive number, got '" + value + "'";
    return false;
  }
  out = x;
  return true;
}

bool unroll::parseChoice(const std::string &flag, const std::string &value,
                         const std::vector<std::string> &choices, std::string &err) {
  for (const std::string &c : choices)
    if (value == c)
      return true;
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  err = flag + " takes " + list + ", got '" + value + "'";
  return false;
}

FlagTable::Setter unroll::setInteger(const std::string &flag, int64_t lo, int64_t &to) {
  return [flag, lo, &to](const std::string &v, std::string &err) {
    return parseInteger(flag, v, lo, to, err);
  };
}

FlagTable::Setter unroll::setPositive(const std::string &flag, double &to) {
  return [flag, &to](const std::string &v, std::string &err) {
    return parsePositive(flag, v, to, err);
  };
}

FlagTable::Setter unroll::setNonNegative(const std::string &flag, double &to) {
  return [flag, &to](const std::string &v, std::string &err) {
    char *end = nullptr;
    double x = strtod(v.c_str(), &end);
    if (v.empty() || *end || !std::isfinite(x) || x < 0) {
      err = flag + " expects a number >= 0, got '" + v + "'";
      return false;
    }
    to = x;
    return true;
  };
}

FlagTable::Setter unroll::setSeed(const std::string &flag, uint64_t &to) {
  return [flag, &to](const std::string &v, std::string &err) {
    int64_t x = 0;
    if (!parseInteger(flag, v, 0, x, err))
      return false;
    to = static_cast<uint64_t>(x);
    return true;
  };
}

FlagTable::Setter unroll::setText(std::string &to) {
  return [&to](const std::string &v, std::string &) {
    to = v;
    return true;
  };
}
