//===- Flags.h - command lines from one table ------------------*- C++ -*-===//
//
// The tools' flags as one table each: a flag's names, its value's name, its
// help and what it sets. The same table parses the command line and writes
// --help, so the two cannot disagree. Messages name the flag and the value:
//
//   --steps expects an integer >= 0, got 'x'
//   --lr expects a positive number, got '-1'
//   --gpu-graphs takes on or off, got 'maybe'
//   unknown option '--frobnicate' (see --help)
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_FLAGS_H
#define UNROLL_TOOLING_FLAGS_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace unroll {

class FlagTable {
public:
  /// Sets what a flag's value means; false with `err` (a whole message).
  using Setter = std::function<bool(const std::string &value, std::string &err)>;

  /// `synopsis`: the usage line after "usage: "; `intro`: the paragraph
  /// after it.
  FlagTable(std::string tool, std::string synopsis, std::string intro);

  /// A heading in --help for the flags that follow.
  FlagTable &section(const std::string &title);
  /// Text printed in --help where it is added (already laid out).
  FlagTable &text(const std::string &laidOut);
  /// A flag without a value. `names`: "--info" or "-h, --help".
  FlagTable &flag(const std::string &names, const std::string &help, std::function<void()> set);
  /// A flag with a value, e.g. ("--steps", "N", "training steps", setter).
  /// `help` may hold newlines: each line is indented under the first.
  FlagTable &option(const std::string &names, const std::string &metavar, const std::string &help,
                    Setter set);

  /// Parses argv[1..]; arguments that are not flags go to `positional` in
  /// order. False with `err` at the first bad flag or value.
  bool parse(int argc, char **argv, std::vector<std::string> &positional, std::string &err) const;
  /// The --help text.
  std::string usage() const;
  /// Whether argv holds -h or --help.
  static bool wantsHelp(int argc, char **argv);

private:
  struct Entry {
    enum Kind { Section, Text, Flag } kind;
    std::vector<std::string> names;
    std::string label, metavar, help;
    std::function<void()> onSwitch;
    Setter onValue;
  };
  const Entry *find(const std::string &name) const;
  std::string tool_, synopsis_, intro_;
  std::vector<Entry> entries_;
};

/// Value checks with the messages above.
bool parseInteger(const std::string &flag, const std::string &value, int64_t lo, int64_t &out,
                  std::string &err);
bool parsePositive(const std::string &flag, const std::string &value, double &out,
                   std::string &err);
/// `value` must be one of `choices`: "--flag takes a or b, got 'c'".
bool parseChoice(const std::string &flag, const std::string &value,
                 const std::vector<std::string> &choices, std::string &err);

/// Setters for the common kinds of value, with the checks above: an integer
/// >= `lo`, a positive number, a number >= 0, a seed (an integer >= 0),
/// any text.
FlagTable::Setter setInteger(const std::string &flag, int64_t lo, int64_t &to);
FlagTable::Setter setPositive(const std::string &flag, double &to);
FlagTable::Setter setNonNegative(const std::string &flag, double &to);
FlagTable::Setter setSeed(const std::string &flag, uint64_t &to);
FlagTable::Setter setText(std::string &to);

} // namespace unroll

#endif // UNROLL_TOOLING_FLAGS_H
