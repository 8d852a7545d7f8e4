// kcache bake-manifest: a YAML manifest and its sources written as one baked manifest for
// workers to read (docs/manifest.md, "Baked manifests").
#include <cstdio>
#include <memory>
#include <string>

#include "client/cli/commands.h"
#include "client/cli/output.h"
#include "kcache/kcache.h"

namespace kcache::cli {

void RegisterBakeManifestCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string manifest, out;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* bake = app.add_subcommand(
      "bake-manifest",
      "Write a manifest's kernels, every source and header inline, as one baked manifest that\n"
      "libkcache's LoadManifestKernels reads without parsing YAML (a worker's faster start).\n"
      "Bake it again whenever the manifest or a source changes.");
  bake->add_option("manifest", flags->manifest, "Kernel manifest (docs/manifest.md)")->required();
  bake->add_option("out", flags->out, "The baked manifest to write (replaced whole)")->required();
  bake->callback([flags, exit_code] {
    if (absl::Status s = client::BakeManifest(flags->manifest, flags->out); !s.ok()) {
      *exit_code = Fail(s.message(), absl::IsPermissionDenied(s) ? kExitFailed : kExitBadInput);
      return;
    }
    std::printf("baked %s into %s\n", flags->manifest.c_str(), flags->out.c_str());
    *exit_code = kExitOk;
  });
}

}  // namespace kcache::cli
