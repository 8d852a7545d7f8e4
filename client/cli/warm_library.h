// `kcache warm --library`: the flags and the run (warm_library_command.cc).
#ifndef KCACHE_CLIENT_CLI_WARM_LIBRARY_H_
#define KCACHE_CLIENT_CLI_WARM_LIBRARY_H_

#include <string>
#include <vector>

namespace kcache::cli {

struct LibraryWarmFlags {
  std::vector<std::string> libraries;  // --library, each a fatbin, ELF or cubin
  std::vector<std::string> packages;   // --package: installed Python distributions
  std::string python = "python3";      // --python: the interpreter whose packages they are
  std::string arch;                    // --arch: sm_ targets
  std::string store;                   // --store (not needed with dry_run)
  std::string toolkit;                 // --toolkit ("" = the default root)
  bool dry_run = false;                // --dry-run: report, compile and store nothing
};

// Reads each library, prints its entries and, per target, whether it has SASS that runs there
// or what would be built from which PTX; without dry_run builds and stores that SASS, a line
// per entry. Each package adds the files it installed that may carry CUDA code
// (PackageFiles, python_packages.h); of those, the ones without any are skipped, counted in a
// line per package. Goes on past a bad library. Returns the exit code: 0 all done; 2 when any
// library could not be read (or a flag, the store or the toolkit is bad); 1 when a compile or the
// store failed.
int RunWarmLibraries(const LibraryWarmFlags& flags);

}  // namespace kcache::cli

#endif  // KCACHE_CLIENT_CLI_WARM_LIBRARY_H_
