//===- FlagsTest.cpp - the flag table: parsing, messages, --help ----------===//
#include "unroll/tooling/Flags.h"

#include <gtest/gtest.h>

using namespace unroll;

namespace {

struct Parsed {
  int64_t steps = -1;
  double lr = 0;
  bool json = false;
  std::string mode;
};

FlagTable table(Parsed &p) {
  FlagTable t("tool", "tool FILE [options]", "Does a thing.");
  t.option("--steps", "N", "training steps", [&p](const std::string &v, std::string &err) {
    return parseInteger("--steps", v, 0, p.steps, err);
  });
  t.section("More");
  t.option("--lr", "X", "a rate\non two lines", [&p](const std::string &v, std::string &err) {
    return parsePositive("--lr", v, p.lr, err);
  });
  t.option("--mode", "M", "one of three", [&p](const std::string &v, std::string &err) {
    return parseChoice("--mode", v, {"a", "b", "c"}, err) && (p.mode = v, true);
  });
  t.option("--a-very-long-flag-name", "VALUE", "help on the next line",
           [](const std::string &, std::string &) { return true; });
  t.flag("-j, --json", "as JSON", [&p] { p.json = true; });
  return t;
}

bool run(std::vector<std::string> args, Parsed &p, std::vector<std::string> &pos,
         std::string &err) {
  std::vector<char *> argv{const_cast<char *>("tool")};
  for (std::string &a : args)
    argv.push_back(a.data());
  return table(p).parse((int)argv.size(), argv.data(), pos, err);
}

} // namespace

TEST(Flags, ParsesValuesSwitchesAliasesAndPositionals) {
  Parsed p;
  std::vector<std::string> pos;
  std::string err;
  ASSERT_TRUE(
      run({"in.so", "--steps", "20", "-j", "--lr", "1e-3", "--mode", "b", "x"}, p, pos, err))
      << err;
  EXPECT_EQ(p.steps, 20);
  EXPECT_DOUBLE_EQ(p.lr, 1e-3);
  EXPECT_TRUE(p.json);
  EXPECT_EQ(p.mode, "b");
  EXPECT_EQ(pos, (std::vector<std::string>{"in.so", "x"}));
}

TEST(Flags, NamesTheFlagAndTheValueInEveryError) {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  } cases[] = {
      {{"--steps", "-1"}, "--steps expects an integer >= 0, got '-1'"},
      {{"--steps", "12x"}, "--steps expects an integer >= 0, got '12x'"},
      {{"--steps", "99999999999999999999"},
       "--steps expects an integer >= 0, got '99999999999999999999'"},
      {{"--lr", "0"}, "--lr expects a positive number, got '0'"},
      {{"--lr", "nan"}, "--lr expects a positive number, got 'nan'"},
      {{"--mode", "d"}, "--mode takes a, b or c, got 'd'"},
      {{"--lr"}, "--lr expects a value"},
      {{"--frobnicate"}, "unknown option '--frobnicate' (see --help)"},
  };
  for (const Case &c : cases) {
    Parsed p;
    std::vector<std::string> pos;
    std::string err;
    EXPECT_FALSE(run(c.args, p, pos, err)) << c.args[0];
    EXPECT_EQ(err, c.error);
  }
}

TEST(Flags, HelpLaysOutTheTable) {
  Parsed p;
  EXPECT_EQ(table(p).usage(), "usage: tool FILE [options]\n"
                              "\n"
                              "Does a thing.\n"
                              "\n"
                              "  --steps N              training steps\n"
                              "\n"
                              "More:\n"
                              "  --lr X                 a rate\n"
                              "                         on two lines\n"
                              "  --mode M               one of three\n"
                              "  --a-very-long-flag-name VALUE\n"
                              "                         help on the next line\n"
                              "  -j, --json             as JSON\n");
  char a0[] = "tool", a1[] = "x", a2[] = "-h";
  char *argv[] = {a0, a1, a2};
  EXPECT_TRUE(FlagTable::wantsHelp(3, argv));
  EXPECT_FALSE(FlagTable::wantsHelp(2, argv));
}

TEST(Flags, SettersCheckAndStore) {
  std::string err, text;
  int64_t n = 0;
  double x = 0, y = -1;
  uint64_t seed = 0;
  EXPECT_TRUE(setInteger("--n", 1, n)("7", err) && n == 7);
  EXPECT_FALSE(setInteger("--n", 1, n)("0", err));
  EXPECT_EQ(err, "--n expects an integer >= 1, got '0'");
  EXPECT_TRUE(setPositive("--x", x)("2.5", err) && x == 2.5);
  EXPECT_FALSE(setPositive("--x", x)("0", err));
  EXPECT_TRUE(setNonNegative("--y", y)("0", err) && y == 0);
  EXPECT_FALSE(setNonNegative("--y", y)("-0.5", err));
  EXPECT_EQ(err, "--y expects a number >= 0, got '-0.5'");
  EXPECT_FALSE(setNonNegative("--y", y)("inf", err));
  EXPECT_TRUE(setSeed("--seed", seed)("123", err) && seed == 123u);
  EXPECT_FALSE(setSeed("--seed", seed)("-1", err));
  EXPECT_EQ(err, "--seed expects an integer >= 0, got '-1'");
  EXPECT_TRUE(setText(text)("a b", err) && text == "a b");
}
