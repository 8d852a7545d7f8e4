// kcached's size flags: bytes with an optional unit, and the earlier MiB names.
#include "daemon/host/size_flags.h"

namespace kcache {

namespace {

// CLI11's size parser wraps "-5" around to 2^64 - 5: refused before it runs.
const CLI::Validator kNotNegative(
    [](std::string& value) {
      return !value.empty() && value[0] == '-' ? std::string("a size cannot be negative")
                                               : std::string();
    },
    "", "not negative");

}  // namespace

CLI::Option* AddSizeFlag(CLI::App& app, const std::string& names, uint64_t& bytes,
                         const std::string& help) {
  // CLI11 runs the transform added last first.
  return app.add_option(names, bytes, help)
      ->transform(CLI::AsSizeValue(false))
      ->check(kNotNegative)
      ->capture_default_str();
}

void AddMibAlias(CLI::App& app, const std::string& earlier_name, uint64_t& bytes,
                 CLI::Option* flag) {
  // A plain number gets "MiB" before the size is parsed.
  CLI::Validator plain_is_mib(
      [](std::string& value) {
        if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
          value += "MiB";
        }
        return std::string();
      },
      "", "plain number is MiB");
  app.add_option(earlier_name, bytes, "MiB: " + flag->get_name())
      ->transform(CLI::AsSizeValue(false))
      ->transform(plain_is_mib)
      ->check(kNotNegative)
      ->excludes(flag)
      ->group(kEarlierNamesGroup);
}

}  // namespace kcache
