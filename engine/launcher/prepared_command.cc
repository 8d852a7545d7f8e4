#include "engine/launcher/prepared_command.h"

#include <filesystem>

namespace kcache::objects {
namespace {

namespace fs = std::filesystem;

BaseDirs MakeBaseDirs(const LauncherOptions& options) {
  BaseDirs dirs;
  std::error_code ec;
  dirs.cwd = fs::current_path(ec).lexically_normal().string();
  for (const std::string& root : options.base_dirs) {
    std::string normal = NormalBaseDir(root);
    if (!normal.empty()) dirs.roots.push_back(normal);
  }
  auto shims = options.lookup.env.find(kShimsDirVariable);
  if (shims != options.lookup.env.end()) dirs.shims = NormalBaseDir(shims->second);
  return dirs;
}

}  // namespace

absl::StatusOr<std::string> RealCompiler(const LauncherOptions& options, CompilerFamily family,
                                         const std::string& compiler) {
  if (family == CompilerFamily::kNvcc && (compiler.empty() || compiler == "nvcc")) {
    return FindNvcc(options.lookup);
  }
  return FindCompiler(compiler, options.lookup);
}

namespace {

// The command `args` names, or why it is not cached (*reason, with the message as detail).
absl::StatusOr<CompilerCommand> ParseCacheable(const LauncherOptions& options,
                                               CompilerFamily family,
                                               const std::string& compiler_path,
                                               const std::vector<std::string>& args,
                                               FileDigests& digests, UncachedReason* reason) {
  ParsedCompilerCommand parsed = ParseCompilerCommand(family, args);
  if (parsed.uncached == UncachedReason::kUnknownOption && family == CompilerFamily::kNvcc) {
    // An option of a newer nvcc than this parser knows: that nvcc's own table says how it
    // parses (memoized by its digest), and the option is keyed as written.
    absl::StatusOr<FileDigest> nvcc = digests.Digest(compiler_path);
    absl::StatusOr<CompilerOptionTable> table =
        nvcc.ok() ? NvccOptionTable(compiler_path, nvcc->hex, options.lookup)
                  : absl::StatusOr<CompilerOptionTable>(nvcc.status());
    if (table.ok()) parsed = ParseCompilerCommand(family, args, &*table);
  }
  if (parsed.uncached != UncachedReason::kNone) {
    *reason = parsed.uncached;
    return absl::FailedPreconditionError(parsed.detail);
  }
  if (parsed.command.writes_deps && parsed.command.dep_file.empty()) {
    *reason = UncachedReason::kNoOutput;
    return absl::FailedPreconditionError("-MD without -MF");
  }
  return std::move(parsed.command);
}

}  // namespace

// The command's key, or why it is not cached (*reason, with the message as detail).
absl::StatusOr<Prepared> Prepare(const LauncherOptions& options, CompilerFamily family,
                                 const std::string& compiler_path,
                                 const std::vector<std::string>& args, FileDigests& digests,
                                 UncachedReason* reason) {
  absl::StatusOr<CompilerCommand> command =
      ParseCacheable(options, family, compiler_path, args, digests, reason);
  if (!command.ok()) return command.status();
  Prepared prepared;
  prepared.command = *std::move(command);
  prepared.compiler_path = compiler_path;
  prepared.dirs = MakeBaseDirs(options);
  absl::StatusOr<std::vector<ToolFile>> tools =
      ToolFiles(prepared.command, compiler_path, options.lookup);
  if (!tools.ok()) {
    *reason = UncachedReason::kUnreadableInput;
    return tools.status();
  }
  std::string native;
  if (!prepared.command.native_args.empty()) {
    absl::StatusOr<std::string> expansion =
        NativeExpansion(compiler_path, prepared.command.native_args);
    if (!expansion.ok()) {
      *reason = UncachedReason::kNativeTarget;
      return expansion.status();
    }
    native = std::move(*expansion);
  }
  absl::StatusOr<ObjectKey> key = ComputeObjectKey(prepared.command, *tools, options.lookup.env,
                                                   prepared.dirs, digests, reason, native);
  if (!key.ok()) return key.status();
  prepared.tools = std::move(*tools);
  prepared.key = std::move(*key);
  return prepared;
}

absl::StatusOr<Prepared> PrepareHanded(const LauncherOptions& options, CompilerFamily family,
                                       const std::vector<std::string>& args,
                                       const HandedMiss& handed, FileDigests& digests,
                                       UncachedReason* reason) {
  absl::StatusOr<CompilerCommand> command =
      ParseCacheable(options, family, handed.compiler_path, args, digests, reason);
  if (!command.ok()) return command.status();
  Prepared prepared;
  prepared.command = *std::move(command);
  prepared.compiler_path = handed.compiler_path;
  prepared.dirs = MakeBaseDirs(options);
  prepared.tools = handed.tools;
  prepared.key = handed.key;
  return prepared;
}

}  // namespace kcache::objects
