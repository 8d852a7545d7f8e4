// The Python distributions installed where a process's python finds them, and their versions:
// a cache directory's library version and torch's (cache_dir_key.h). Read from the
// `<name>-<version>.dist-info` folders of the site directories, without running Python (which
// client/cli/python_packages.h asks for a package's files). A distribution found nowhere reads
// as no version: a key that then differs from the capture's misses, it never hits wrongly.
#ifndef KCACHE_ENGINE_CACHE_DIRS_INSTALLED_VERSIONS_H_
#define KCACHE_ENGINE_CACHE_DIRS_INSTALLED_VERSIONS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/cache_dirs/cache_dir_table.h"

namespace kcache::cache_dirs {

// A distribution's name as its index knows it (PEP 503): lower case, each run of '-', '_' and
// '.' one '-'. "Flash_Infer.python" -> "flash-infer-python".
std::string NormalizedDistribution(absl::string_view name);

// The site directories of the python3 (else python) first on `env`'s PATH: $PYTHONPATH's
// entries, then under the folder above its bin/ (a virtual environment's own, the system's
// for /usr/bin) lib/python3.*/site-packages, lib/python3.*/dist-packages and
// lib/python3/dist-packages (Debian's), those that exist. None without a python on PATH.
std::vector<std::string> SiteDirectories(const Environment& env);

// The versions of the distributions in `site_dirs`, by NormalizedDistribution; where two
// directories hold one, the first's (the one Python imports).
std::map<std::string, std::string> InstalledVersions(const std::vector<std::string>& site_dirs);

}  // namespace kcache::cache_dirs

#endif  // KCACHE_ENGINE_CACHE_DIRS_INSTALLED_VERSIONS_H_
