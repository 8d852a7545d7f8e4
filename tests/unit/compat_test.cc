// Pins the serving rules (docs/serving-rules.md): every (artifact target, device SM) pair of CUDA
// 13 is written out below as an explicit table, so a change to a rule shows up as a changed cell.
// docs/serving-rules.md carries the same table.
#include "core/compat.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/target.h"
#include "gtest/gtest.h"

namespace kcache {
namespace {

// The device columns of kTable, in order: every SM CUDA 13 supports.
constexpr Sm kDevices[] = {{7, 5}, {8, 0},  {8, 6},  {8, 7},  {8, 8},  {8, 9},
                           {9, 0}, {10, 0}, {10, 3}, {11, 0}, {12, 0}, {12, 1}};
constexpr size_t kDeviceCount = sizeof(kDevices) / sizeof(kDevices[0]);

struct Row {
  absl::string_view target;
  // One cell per device in kDevices, separated by spaces:
  //   E exact SASS, C compatible SASS, P PTX (driver JIT), - must not be served.
  absl::string_view cells;
};

// clang-format off
// Columns:           7.5 8.0 8.6 8.7 8.8 8.9 9.0 10.0 10.3 11.0 12.0 12.1
constexpr Row kTable[] = {
    {"sm_75",        "E - - - - - - - - - - -"},
    {"sm_80",        "- E C C C C - - - - - -"},
    {"sm_86",        "- - E C C C - - - - - -"},
    {"sm_87",        "- - - E C C - - - - - -"},
    {"sm_88",        "- - - - E C - - - - - -"},
    {"sm_89",        "- - - - - E - - - - - -"},
    {"sm_90",        "- - - - - - E - - - - -"},
    {"sm_100",       "- - - - - - - E C - - -"},
    {"sm_103",       "- - - - - - - - E - - -"},
    {"sm_110",       "- - - - - - - - - E - -"},
    {"sm_120",       "- - - - - - - - - - E C"},
    {"sm_121",       "- - - - - - - - - - - E"},
    {"sm_90a",       "- - - - - - E - - - - -"},
    {"sm_100a",      "- - - - - - - E - - - -"},
    {"sm_103a",      "- - - - - - - - E - - -"},
    {"sm_110a",      "- - - - - - - - - E - -"},
    {"sm_120a",      "- - - - - - - - - - E -"},
    {"sm_121a",      "- - - - - - - - - - - E"},
    {"sm_100f",      "- - - - - - - E C - - -"},
    {"sm_103f",      "- - - - - - - - E - - -"},
    {"sm_110f",      "- - - - - - - - - E - -"},
    {"sm_120f",      "- - - - - - - - - - E C"},
    {"sm_121f",      "- - - - - - - - - - - E"},
    {"compute_75",   "P P P P P P P P P P P P"},
    {"compute_80",   "- P P P P P P P P P P P"},
    {"compute_86",   "- - P P P P P P P P P P"},
    {"compute_87",   "- - - P P P P P P P P P"},
    {"compute_88",   "- - - - P P P P P P P P"},
    {"compute_89",   "- - - - - P P P P P P P"},
    {"compute_90",   "- - - - - - P P P P P P"},
    {"compute_100",  "- - - - - - - P P P P P"},
    {"compute_103",  "- - - - - - - - P P P P"},
    {"compute_110",  "- - - - - - - - - P P P"},
    {"compute_120",  "- - - - - - - - - - P P"},
    {"compute_121",  "- - - - - - - - - - - P"},
    {"compute_90a",  "- - - - - - P - - - - -"},
    {"compute_100a", "- - - - - - - P - - - -"},
    {"compute_103a", "- - - - - - - - P - - -"},
    {"compute_110a", "- - - - - - - - - P - -"},
    {"compute_120a", "- - - - - - - - - - P -"},
    {"compute_121a", "- - - - - - - - - - - P"},
    {"compute_100f", "- - - - - - - P P - - -"},
    {"compute_103f", "- - - - - - - - P - - -"},
    {"compute_110f", "- - - - - - - - - P - -"},
    {"compute_120f", "- - - - - - - - - - P P"},
    {"compute_121f", "- - - - - - - - - - - P"},
};
// clang-format on

std::optional<ServeRule> RuleFromCell(char cell) {
  switch (cell) {
    case 'E':
      return ServeRule::kExactSass;
    case 'C':
      return ServeRule::kCompatibleSass;
    case 'P':
      return ServeRule::kPtxJit;
    default:
      return std::nullopt;
  }
}

std::string CellOf(std::optional<ServeRule> rule) {
  if (!rule.has_value()) return "-";
  switch (*rule) {
    case ServeRule::kExactSass:
      return "E";
    case ServeRule::kCompatibleSass:
      return "C";
    case ServeRule::kPtxJit:
      return "P";
    case ServeRule::kCompiled:
      return "compiled";
  }
  return "?";
}

Target T(absl::string_view text) {
  absl::StatusOr<Target> target = ParseTarget(text);
  EXPECT_TRUE(target.ok()) << text << ": " << target.status();
  return target.value_or(Target{});
}

std::vector<Target> Ts(std::vector<absl::string_view> texts) {
  std::vector<Target> targets;
  for (absl::string_view text : texts) targets.push_back(T(text));
  return targets;
}

// The name of the target PickBest chose, or "none".
std::string Best(const std::vector<Target>& candidates, Sm device) {
  std::optional<size_t> best = PickBest(candidates, device);
  if (!best.has_value()) return "none";
  return candidates.at(*best).ToString();
}

std::vector<Target> AllTableTargets() {
  std::vector<Target> targets;
  for (const Row& row : kTable) targets.push_back(T(row.target));
  return targets;
}

TEST(CompatTableTest, CoversEveryCuda13TargetOnce) {
  // 12 plain + 6 `a` + 5 `f`, for SASS and for PTX.
  EXPECT_EQ(std::size(kTable), 46u);
  std::vector<absl::string_view> names;
  for (const Row& row : kTable) {
    names.push_back(row.target);
    EXPECT_EQ(row.cells.size(), 2 * kDeviceCount - 1) << row.target << " has a malformed row";
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "duplicate row";
}

TEST(CompatTableTest, CompatibilityOfMatchesTableForEveryTargetAndDevice) {
  for (const Row& row : kTable) {
    const Target target = T(row.target);
    ASSERT_EQ(target.ToString(), row.target);
    for (size_t d = 0; d < kDeviceCount; ++d) {
      const char cell = row.cells.at(2 * d);
      EXPECT_EQ(CellOf(CompatibilityOf(target, kDevices[d])), CellOf(RuleFromCell(cell)))
          << row.target << " on device " << kDevices[d].ToString();
    }
  }
}

TEST(CompatTableTest, NeverReturnsCompiled) {
  for (const Target& target : AllTableTargets()) {
    for (Sm device : kDevices) {
      EXPECT_NE(CompatibilityOf(target, device), std::optional(ServeRule::kCompiled));
    }
  }
}

TEST(CompatTest, Sm75DeviceIsNeverGivenSassFor80OrLater) {
  for (const Target& target : AllTableTargets()) {
    if (target.kind != TargetKind::kSass || target.sm.arch() < 80) continue;
    EXPECT_EQ(CompatibilityOf(target, Sm{7, 5}), std::nullopt) << target.ToString();
  }
  EXPECT_EQ(Best(Ts({"sm_80", "sm_86", "sm_90a", "sm_120f"}), Sm{7, 5}), "none");
  EXPECT_EQ(Best(Ts({"sm_80", "compute_75", "sm_86"}), Sm{7, 5}), "compute_75");
}

TEST(CompatTest, ServeRuleNamesAndNumbersAreStable) {
  EXPECT_EQ(ServeRuleName(ServeRule::kExactSass), "exact_sass");
  EXPECT_EQ(ServeRuleName(ServeRule::kCompatibleSass), "compatible_sass");
  EXPECT_EQ(ServeRuleName(ServeRule::kPtxJit), "ptx_jit");
  EXPECT_EQ(ServeRuleName(ServeRule::kCompiled), "compiled");
  EXPECT_EQ(static_cast<int>(ServeRule::kExactSass), 1);
  EXPECT_EQ(static_cast<int>(ServeRule::kCompatibleSass), 2);
  EXPECT_EQ(static_cast<int>(ServeRule::kPtxJit), 3);
  EXPECT_EQ(static_cast<int>(ServeRule::kCompiled), 4);
}

TEST(PickBestTest, ExactBeatsCompatibleBeatsPtx) {
  const Sm device{8, 6};
  EXPECT_EQ(Best(Ts({"compute_86", "sm_80", "sm_86"}), device), "sm_86");
  EXPECT_EQ(Best(Ts({"compute_86", "sm_80"}), device), "sm_80");
  EXPECT_EQ(Best(Ts({"sm_80", "compute_86"}), device), "sm_80");
  EXPECT_EQ(Best(Ts({"compute_80", "compute_86"}), device), "compute_86");
  // An exact `a` cubin beats a compatible plain one.
  EXPECT_EQ(Best(Ts({"sm_100", "sm_103a"}), Sm{10, 3}), "sm_103a");
  EXPECT_TRUE(BetterFor(device, T("sm_86"), T("sm_80")));
  EXPECT_FALSE(BetterFor(device, T("sm_80"), T("sm_86")));
  EXPECT_TRUE(BetterFor(device, T("sm_80"), T("compute_86")));
  EXPECT_FALSE(BetterFor(device, T("compute_86"), T("sm_80")));
}

TEST(PickBestTest, HigherCompatibleMinorWins) {
  const Sm device{8, 9};
  EXPECT_EQ(Best(Ts({"sm_80", "sm_86", "sm_87"}), device), "sm_87");
  EXPECT_EQ(Best(Ts({"sm_87", "sm_86", "sm_80"}), device), "sm_87");
  EXPECT_EQ(Best(Ts({"sm_80", "sm_88", "sm_86"}), device), "sm_88");
  EXPECT_TRUE(BetterFor(device, T("sm_86"), T("sm_80")));
  EXPECT_FALSE(BetterFor(device, T("sm_80"), T("sm_86")));
}

TEST(PickBestTest, HigherPtxArchWins) {
  EXPECT_EQ(Best(Ts({"compute_75", "compute_86", "compute_80"}), Sm{9, 0}), "compute_86");
  // compute_90 and compute_90a do not fit an 8.9 device.
  EXPECT_EQ(Best(Ts({"compute_90", "compute_90a", "compute_75"}), Sm{8, 9}), "compute_75");
}

TEST(PickBestTest, TiesPreferPlainOverFamilyOverArchSpecific) {
  EXPECT_EQ(Best(Ts({"sm_100a", "sm_100f", "sm_100"}), Sm{10, 0}), "sm_100");
  EXPECT_EQ(Best(Ts({"sm_100a", "sm_100f"}), Sm{10, 0}), "sm_100f");
  EXPECT_EQ(Best(Ts({"sm_100f", "sm_100"}), Sm{10, 3}), "sm_100");
  EXPECT_EQ(Best(Ts({"compute_120a", "compute_120f", "compute_120"}), Sm{12, 0}), "compute_120");
  EXPECT_EQ(Best(Ts({"compute_120a", "compute_120f"}), Sm{12, 0}), "compute_120f");
}

TEST(PickBestTest, EmptyListGivesNothing) { EXPECT_EQ(PickBest({}, Sm{8, 6}), std::nullopt); }

TEST(PickBestTest, AllIncompatibleGivesNothing) {
  EXPECT_EQ(
      PickBest(Ts({"sm_90", "sm_75", "sm_89", "compute_90", "sm_90a", "compute_87"}), Sm{8, 6}),
      std::nullopt);
  EXPECT_EQ(PickBest(Ts({"sm_103a", "sm_103", "sm_110", "compute_103f", "sm_120f"}), Sm{10, 0}),
            std::nullopt);
}

TEST(PickBestTest, ReturnsIndexIntoCandidates) {
  EXPECT_EQ(PickBest(Ts({"sm_90", "sm_75", "sm_80"}), Sm{8, 6}), std::optional<size_t>(2));
}

TEST(PickBestTest, FromEveryTargetPicksExactPlainCubinOrElseExactPlainPtx) {
  const std::vector<Target> all = AllTableTargets();
  std::vector<Target> ptx_only;
  for (const Target& target : all) {
    if (target.kind == TargetKind::kPtx) ptx_only.push_back(target);
  }
  // Expected answers per device, in kDevices order.
  constexpr absl::string_view kBestOfAll[] = {"sm_75",  "sm_80",  "sm_86",  "sm_87",
                                              "sm_88",  "sm_89",  "sm_90",  "sm_100",
                                              "sm_103", "sm_110", "sm_120", "sm_121"};
  constexpr absl::string_view kBestPtx[] = {
      "compute_75", "compute_80",  "compute_86",  "compute_87",  "compute_88",  "compute_89",
      "compute_90", "compute_100", "compute_103", "compute_110", "compute_120", "compute_121"};
  for (size_t d = 0; d < kDeviceCount; ++d) {
    EXPECT_EQ(Best(all, kDevices[d]), kBestOfAll[d]) << kDevices[d].ToString();
    EXPECT_EQ(Best(ptx_only, kDevices[d]), kBestPtx[d]) << kDevices[d].ToString();
  }
}

// BetterFor must be a strict total order over the targets that fit a device, or PickBest's
// answer would depend on the order of the candidates.
TEST(BetterForTest, IsAStrictTotalOrderOverFittingTargets) {
  const std::vector<Target> all = AllTableTargets();
  for (Sm device : kDevices) {
    std::vector<Target> fitting;
    for (const Target& target : all) {
      if (CompatibilityOf(target, device).has_value()) fitting.push_back(target);
    }
    for (const Target& a : fitting) {
      EXPECT_FALSE(BetterFor(device, a, a)) << a.ToString() << " on " << device.ToString();
      for (const Target& b : fitting) {
        if (a == b) continue;
        EXPECT_NE(BetterFor(device, a, b), BetterFor(device, b, a))
            << a.ToString() << " vs " << b.ToString() << " on " << device.ToString();
        for (const Target& c : fitting) {
          if (BetterFor(device, a, b) && BetterFor(device, b, c)) {
            EXPECT_TRUE(BetterFor(device, a, c))
                << a.ToString() << " > " << b.ToString() << " > " << c.ToString();
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kcache
