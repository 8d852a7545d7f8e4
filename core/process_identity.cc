#include "core/process_identity.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace kcache {

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

std::string ThisProcessInWords() {
  return absl::StrCat("uid ", getuid(), " pid ", getpid(), " on ", HostName());
}

}  // namespace kcache
