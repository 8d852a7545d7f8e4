// kcached's size flags, in one unit and one word order: every one is named
// --<subject>[-max]-bytes and takes bytes, with an optional unit (8GiB, 500MiB, 64KiB, 1G; a
// plain number is bytes). Earlier names stay accepted: those in the same unit as aliases on the
// flag's own line, those in MiB (--memory-cache-mb, ...) as options of their own, listed under
// "Earlier names" in --help, where a plain number still means MiB.
#ifndef KCACHE_DAEMON_HOST_SIZE_FLAGS_H_
#define KCACHE_DAEMON_HOST_SIZE_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace kcache {

// The --help group the earlier names are listed under.
inline constexpr char kEarlierNamesGroup[] =
    "Earlier names (still accepted; each sets the flag its description names)";

// Adds the size flag `names` ("--object-max-bytes" or, with aliases in the same unit,
// "--object-max-bytes,--max-object-bytes") setting `bytes`, whose value at the call is the
// default shown in --help. Returns the option, for checks and AddMibAlias.
CLI::Option* AddSizeFlag(CLI::App& app, const std::string& names, uint64_t& bytes,
                         const std::string& help);

// Adds `earlier_name`, a flag that took MiB, as another way to set `flag`'s bytes (a plain
// number is MiB; a unit is taken as given). Giving both is an error naming both.
void AddMibAlias(CLI::App& app, const std::string& earlier_name, uint64_t& bytes,
                 CLI::Option* flag);

}  // namespace kcache

#endif  // KCACHE_DAEMON_HOST_SIZE_FLAGS_H_
