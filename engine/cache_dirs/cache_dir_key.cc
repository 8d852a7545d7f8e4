#include "engine/cache_dirs/cache_dir_key.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/coding.h"
#include "core/sha256.h"
#include "engine/cache_dirs/installed_versions.h"

namespace kcache::cache_dirs {
namespace {

bool Keyed(const CacheDirSpec& spec, const std::string& name) {
  if (std::find(spec.variables.begin(), spec.variables.end(), name) != spec.variables.end()) {
    return false;  // where the directory is
  }
  for (const char* always : kAlwaysKeyedVariables) {
    if (name == always) return true;
  }
  for (const std::string& prefix : spec.prefixes) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

std::string VersionOf(const std::string& distribution, const CacheDirContext& context) {
  auto found = context.versions.find(NormalizedDistribution(distribution));
  return found != context.versions.end() ? found->second : "";
}

// The SHA-256 of the file at `path`, "" when it cannot be read.
std::string FileSha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  Sha256 sha;
  std::string chunk(1 << 16, '\0');
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    sha.Update(absl::string_view(chunk.data(), static_cast<size_t>(in.gcount())));
  }
  return DigestHex(sha.Finish());
}

}  // namespace

std::string ToolkitIdentity(const std::string& root) {
  std::string nvcc = FileSha256(root + "/bin/nvcc");
  if (nvcc.empty()) return "";
  std::string version = "?";
  std::ifstream header(root + "/include/cuda.h");
  for (std::string line; std::getline(header, line);) {
    absl::string_view rest = line;
    int number = 0;
    if (absl::ConsumePrefix(&rest, "#define CUDA_VERSION ") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &number)) {
      version = absl::StrCat(number / 1000, ".", number % 1000 / 10);
      break;
    }
  }
  std::string ptxas = FileSha256(root + "/bin/ptxas");
  return absl::StrCat(version, " nvcc ", nvcc.substr(0, 12), " ptxas ",
                      ptxas.empty() ? "-" : ptxas.substr(0, 12));
}

std::string LibraryVersion(const CacheDirSpec& spec, const CacheDirContext& context) {
  for (const std::string& distribution : spec.distributions) {
    if (std::string version = VersionOf(distribution, context); !version.empty()) return version;
  }
  return "";
}

CacheDirKey KeyFor(const CacheDirSpec& spec, const std::string& dir,
                   const CacheDirContext& context) {
  CacheDirKey key;
  auto add = [&](std::string name, std::string value) {
    key.components.emplace_back(std::move(name), std::move(value));
  };
  add("library", spec.name);
  add("version", LibraryVersion(spec, context));
  std::vector<std::string> sms = context.sms;
  std::sort(sms.begin(), sms.end());
  sms.erase(std::unique(sms.begin(), sms.end()), sms.end());
  add("sms", absl::StrJoin(sms, ","));
  for (KeyPart part : spec.keys) {
    switch (part) {
      case KeyPart::kToolkit:
        add("toolkit", context.toolkit);
        break;
      case KeyPart::kTorch:
        add("torch", VersionOf("torch", context));
        break;
      case KeyPart::kDriver:
        add("driver", context.driver);
        break;
      case KeyPart::kCommandLine: {
        // Each argument length-prefixed: ("a b") and ("a", "b") differ.
        std::string line;
        for (const std::string& arg : context.command_line) {
          PutFixed32(line, static_cast<uint32_t>(arg.size()));
          line += arg;
        }
        add("command_line", absl::StrJoin(context.command_line, " ") + "\n" + Sha256Hex(line));
        break;
      }
      case KeyPart::kPath:
        add("path", dir);
        break;
    }
  }
  for (const auto& [name, value] : context.env) {  // a map: in name order
    if (Keyed(spec, name)) add("env " + name, value);
  }
  key.digest = CacheDirKeyDigest(key.components);
  return key;
}

std::string CacheDirKeyDigest(const std::vector<std::pair<std::string, std::string>>& components) {
  std::string bytes;
  for (const auto& [name, value] : components) {
    PutFixed32(bytes, static_cast<uint32_t>(name.size()));
    bytes += name;
    PutFixed32(bytes, static_cast<uint32_t>(value.size()));
    bytes += value;
  }
  return Sha256Hex(bytes);
}

std::string CacheDirKey::FirstDifference(const CacheDirKey& other) const {
  std::map<std::string, std::string> theirs(other.components.begin(), other.components.end());
  for (const auto& [name, value] : components) {
    auto found = theirs.find(name);
    if (found == theirs.end() || found->second != value) return name;
    theirs.erase(found);
  }
  return theirs.empty() ? "" : theirs.begin()->first;
}

}  // namespace kcache::cache_dirs
