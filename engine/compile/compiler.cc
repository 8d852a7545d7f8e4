#include "engine/compile/compiler.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/compile_options.h"
#include "core/cubin.h"
#include "core/sha256.h"
#include "engine/compile/nvrtc_api.h"
#include "engine/compile/toolkit.h"
#include "engine/fatbin/ptx_sass.h"

namespace kcache {
namespace {

// What one NVRTC pass produced.
struct PassOutput {
  std::string cubin;  // sm_ targets only
  std::string ptx;    // without the trailing NUL NVRTC appends
  std::string ltoir;  // -dlto passes only
  std::vector<std::pair<std::string, std::string>> lowered_names;
  std::string log;
  uint64_t micros = 0;
};

// Owns one nvrtcProgram. Programs are never shared between threads (see nvrtc_api.h).
class Program {
 public:
  explicit Program(const NvrtcApi& api) : api_(api) {}
  ~Program() {
    if (prog_ != nullptr) api_.destroy_program(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram* out() { return &prog_; }
  nvrtcProgram get() const { return prog_; }

 private:
  const NvrtcApi& api_;
  nvrtcProgram prog_ = nullptr;
};

std::string DisplayName(const CompileJob& job) {
  return job.spec.name.empty() ? std::string("kernel") : job.spec.name;
}

// NVRTC reports program output through size + copy function pairs.
template <typename SizeFn, typename GetFn>
absl::StatusOr<std::string> Fetch(const NvrtcApi& api, nvrtcProgram prog, SizeFn size_fn,
                                  GetFn get_fn, const char* what) {
  size_t size = 0;
  if (nvrtcResult r = size_fn(prog, &size); r != NVRTC_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("NVRTC could not report the ", what, " size: ", api.ErrorString(r)));
  }
  std::string out(size, '\0');
  if (size == 0) return out;
  if (nvrtcResult r = get_fn(prog, out.data()); r != NVRTC_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("NVRTC could not return the ", what, ": ", api.ErrorString(r)));
  }
  return out;
}

std::string TrimTrailingNul(std::string s) {
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

// NVRTC's log names the program ("kernel_<id>.cu(3): error ..."); the program name is derived
// from the content because -lineinfo puts it into the cubin. Messages name the source as its
// sender did instead ("broken.cu(3): error ..."), when that name is printable and short.
std::string SourceNamedLog(std::string log, const std::string& program_name,
                           const std::string& source_name) {
  bool printable = !source_name.empty() && source_name.size() <= 255 &&
                   std::all_of(source_name.begin(), source_name.end(),
                               [](char c) { return c >= 0x20 && c < 0x7f; });
  if (!printable) return log;
  return absl::StrReplaceAll(log, {{program_name, source_name}});
}

// NVRTC says why it could not open an include ("cannot open source file "/etc/shadow":
// Permission denied", ": is a directory") but says nothing for a missing file. Those reasons
// tell a hostile source which host paths exist; every such line ends at the path instead, so
// "not allowed" and "not there" read the same.
std::string UniformOpenErrors(std::string log) {
  const std::string kMarker = "cannot open source file \"";
  size_t at = 0;
  while ((at = log.find(kMarker, at)) != std::string::npos) {
    size_t path_start = at + kMarker.size();
    size_t line_end = log.find('\n', path_start);
    if (line_end == std::string::npos) line_end = log.size();
    size_t closing = log.rfind('"', line_end - 1);
    if (closing >= path_start && closing + 2 < line_end && log[closing + 1] == ':' &&
        log[closing + 2] == ' ') {
      log.erase(closing + 1, line_end - closing - 1);
    }
    at = path_start;
  }
  return log;
}

absl::Status CompileFailed(const CompileJob& job, const std::string& log) {
  absl::Status status =
      absl::AbortedError(absl::StrCat("compile of ", DisplayName(job), " (", job.id.ShortHex(),
                                      ") for ", job.target.ToString(), " failed:\n", log));
  status.SetPayload(kCompileLogPayload, absl::Cord(log));
  return status;
}

// Lowered names, then LTO-IR (dlto) or PTX and, for sm_ targets, the cubin.
absl::Status CollectOutputs(const NvrtcApi& api, nvrtcProgram prog, const CompileJob& job,
                            const Target& arch_target, bool dlto, PassOutput* out) {
  for (const std::string& expr : job.spec.name_expressions) {
    const char* lowered = nullptr;
    if (nvrtcResult r = api.get_lowered_name(prog, expr.c_str(), &lowered);
        r != NVRTC_SUCCESS || lowered == nullptr) {
      return absl::InternalError(absl::StrCat("NVRTC has no lowered name for \"",
                                              absl::CEscape(expr), "\": ", api.ErrorString(r)));
    }
    out->lowered_names.emplace_back(expr, lowered);
  }
  absl::StatusOr<std::string> bytes;
  if (dlto) {
    bytes = Fetch(api, prog, api.get_ltoir_size, api.get_ltoir, "LTO-IR");
    if (!bytes.ok()) return bytes.status();
    out->ltoir = *std::move(bytes);
  } else {
    bytes = Fetch(api, prog, api.get_ptx_size, api.get_ptx, "PTX");
    if (!bytes.ok()) return bytes.status();
    out->ptx = TrimTrailingNul(*std::move(bytes));
    if (arch_target.kind == TargetKind::kSass) {
      bytes = Fetch(api, prog, api.get_cubin_size, api.get_cubin, "CUBIN");
      if (!bytes.ok()) return bytes.status();
      out->cubin = *std::move(bytes);
    }
  }
  return absl::OkStatus();
}

// include dirs, the spec's options, then what the daemon chooses: -arch, the seed, -dlto.
std::vector<std::string> PassOptions(const Toolkit& toolkit, const CompileJob& job,
                                     const Target& arch_target, bool dlto) {
  std::vector<std::string> options = toolkit.include_options();
  options.insert(options.end(), job.spec.options.begin(), job.spec.options.end());
  options.push_back(absl::StrCat("-arch=", arch_target.ToString()));
  options.push_back(
      absl::StrCat("-frandom-seed=", RandomSeedFor(job.id, job.target, toolkit.identity().id)));
  if (dlto) options.push_back("-dlto");
  return options;
}

// Runs NVRTC once with `arch_target` as -arch and, when `dlto`, -dlto.
absl::StatusOr<PassOutput> RunPass(const Toolkit& toolkit, const CompileJob& job,
                                   const Target& arch_target, bool dlto) {
  const NvrtcApi& api = toolkit.nvrtc();
  auto start = std::chrono::steady_clock::now();

  std::vector<const char*> header_contents, header_names;
  for (const auto& [name, content] : job.spec.headers) {
    header_names.push_back(name.c_str());
    header_contents.push_back(content.c_str());
  }
  // The program name shows in logs and, with -lineinfo, in the output: derive it from the
  // content (never from the display name) so equal kernels give equal bytes.
  std::string program_name = absl::StrCat("kernel_", job.id.ShortHex(), ".cu");
  Program prog(api);
  if (nvrtcResult r =
          api.create_program(prog.out(), job.spec.source.c_str(), program_name.c_str(),
                             header_names.size(), header_contents.data(), header_names.data());
      r != NVRTC_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("nvrtcCreateProgram failed for ", DisplayName(job), ": ", api.ErrorString(r)));
  }
  for (const std::string& expr : job.spec.name_expressions) {
    if (nvrtcResult r = api.add_name_expression(prog.get(), expr.c_str()); r != NVRTC_SUCCESS) {
      return absl::InvalidArgumentError(absl::StrCat("name expression \"", absl::CEscape(expr),
                                                     "\" was refused: ", api.ErrorString(r)));
    }
  }

  std::vector<std::string> options = PassOptions(toolkit, job, arch_target, dlto);
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());

  nvrtcResult compiled = api.compile_program(prog.get(), option_ptrs.size(), option_ptrs.data());
  PassOutput out;
  absl::StatusOr<std::string> log =
      Fetch(api, prog.get(), api.get_program_log_size, api.get_program_log, "compile log");
  if (!log.ok()) return log.status();
  out.log = UniformOpenErrors(
      SourceNamedLog(TrimTrailingNul(*std::move(log)), program_name, job.spec.source_name));
  if (compiled == NVRTC_ERROR_COMPILATION) return CompileFailed(job, out.log);
  if (compiled == NVRTC_ERROR_INVALID_OPTION) {
    return absl::InvalidArgumentError(
        absl::StrCat("NVRTC refused the options of ", DisplayName(job), ": ", out.log));
  }
  if (compiled != NVRTC_SUCCESS) {
    return absl::InternalError(absl::StrCat("NVRTC failed on ", DisplayName(job), " for ",
                                            arch_target.ToString(), ": ", api.ErrorString(compiled),
                                            "\n", out.log));
  }

  if (absl::Status s = CollectOutputs(api, prog.get(), job, arch_target, dlto, &out); !s.ok()) {
    return s;
  }
  out.micros = std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count();
  return out;
}

// NVRTC takes C strings: a NUL inside the source, a header or a name expression would cut it
// short, and the compile would not be of what the kernel id names.
absl::Status CheckNoNul(const KernelSpec& spec) {
  auto has_nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
  if (has_nul(spec.source)) {
    return absl::InvalidArgumentError("the kernel source contains a NUL byte");
  }
  for (const auto& [name, content] : spec.headers) {
    if (has_nul(name) || has_nul(content)) {
      return absl::InvalidArgumentError(
          absl::StrCat("header \"", absl::CEscape(name), "\" contains a NUL byte"));
    }
  }
  for (const std::string& expr : spec.name_expressions) {
    if (has_nul(expr)) {
      return absl::InvalidArgumentError(
          absl::StrCat("name expression \"", absl::CEscape(expr), "\" contains a NUL byte"));
    }
  }
  return absl::OkStatus();
}

Artifact MakeArtifact(const Toolkit& toolkit, const CompileJob& job, ArtifactKind kind,
                      const Target& target, const PassOutput& pass, std::string bytes) {
  Artifact a;
  a.meta.key.kernel_id = job.id;
  a.meta.key.kind = kind;
  a.meta.key.target = target;
  a.meta.key.toolkit = toolkit.identity().id;
  a.meta.kernel_name = job.spec.name;
  a.meta.lowered_names = pass.lowered_names;
  a.meta.compile_log = pass.log;
  a.meta.compile_micros = pass.micros;
  a.meta.size = bytes.size();
  a.meta.checksum = PayloadChecksum(bytes);
  a.meta.created_unix_ms = NowUnixMillis();
  a.meta.min_driver = MinDriverFor(kind, toolkit.identity().major, toolkit.identity().minor);
  a.bytes = std::move(bytes);
  return a;
}

class NvrtcCompiler final : public Compiler {
 public:
  explicit NvrtcCompiler(std::shared_ptr<const Toolkit> toolkit) : toolkit_(std::move(toolkit)) {}

  // Stateless apart from the immutable toolkit: safe to call from many threads.
  absl::StatusOr<CompileOutput> Compile(const CompileJob& job) override {
    if (!job.ptx.empty()) return CompilePtx(job);
    if (absl::Status s = ValidateCompileOptions(job.spec.options); !s.ok()) return s;
    if (absl::Status s = CheckNoNul(job.spec); !s.ok()) return s;
    if (absl::Status s = ValidateTarget(job.target, toolkit_->supported_archs(),
                                        toolkit_->identity().DisplayName());
        !s.ok()) {
      return s;
    }
    if (job.demand.status != nullptr) job.demand.status->Compiling();  // nothing to wait for
    const Target ptx_target = job.target.WithKind(TargetKind::kPtx);
    CompileOutput output;
    absl::StatusOr<PassOutput> pass = RunPass(*toolkit_, job, job.target, /*dlto=*/false);
    if (!pass.ok()) return pass.status();
    if (job.target.kind == TargetKind::kSass) {
      output.artifacts.push_back(MakeArtifact(*toolkit_, job, ArtifactKind::kCubin, job.target,
                                              *pass, std::move(pass->cubin)));
    }
    output.artifacts.push_back(
        MakeArtifact(*toolkit_, job, ArtifactKind::kPtx, ptx_target, *pass, std::move(pass->ptx)));
    if (job.want_ltoir) {
      absl::StatusOr<PassOutput> lto = RunPass(*toolkit_, job, ptx_target, /*dlto=*/true);
      if (!lto.ok()) return lto.status();
      output.artifacts.push_back(MakeArtifact(*toolkit_, job, ArtifactKind::kLtoir, ptx_target,
                                              *lto, std::move(lto->ltoir)));
    }
    return output;
  }

  const Toolkit& toolkit() const override { return *toolkit_; }

 private:
  // CompileJob::ptx: the PTX built into a cubin for job.target with nvJitLink.
  absl::StatusOr<CompileOutput> CompilePtx(const CompileJob& job) {
    if (job.target.kind != TargetKind::kSass) {
      return absl::InvalidArgumentError(
          absl::StrCat("SASS is built from PTX for an sm_ target, not ", job.target.ToString()));
    }
    for (const std::string& option : job.spec.options) {
      if (!IsPtxJobOption(option)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "option '", option, "' is not taken when SASS is built from PTX (only -O0 to -O3)"));
      }
    }
    if (absl::Status s = ValidateTarget(job.target, toolkit_->supported_archs(),
                                        toolkit_->identity().DisplayName());
        !s.ok()) {
      return s;
    }
    absl::StatusOr<Target> ptx_target = fatbin::PtxTextTarget(job.ptx);
    if (!ptx_target.ok()) return ptx_target.status();
    if (job.demand.status != nullptr) job.demand.status->Compiling();
    auto start = std::chrono::steady_clock::now();
    PassOutput pass;
    absl::StatusOr<std::string> cubin =
        LinkPtx(*toolkit_, job.ptx, job.target, job.spec.options, &pass.log);
    if (!cubin.ok()) return cubin.status();
    pass.micros = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now() - start)
                                            .count());
    absl::StatusOr<int> arch = CubinSmArch(*cubin);
    if (!arch.ok() || *arch != job.target.sm.arch()) {
      return absl::InternalError(absl::StrCat("nvJitLink built ", job.target.ToString(),
                                              " but its output is not a cubin for that SM"));
    }
    CompileOutput output;
    Artifact artifact = fatbin::PtxSassArtifact(
        fatbin::PtxSassKey(job.id, job.target, toolkit_->identity().id),
        fatbin::PtxSassOrigin{job.spec.name, *ptx_target}, *std::move(cubin), std::move(pass.log),
        pass.micros,
        MinDriverFor(ArtifactKind::kCubin, toolkit_->identity().major, toolkit_->identity().minor));
    artifact.meta.size = artifact.bytes.size();
    artifact.meta.checksum = PayloadChecksum(artifact.bytes);
    output.artifacts.push_back(std::move(artifact));
    return output;
  }

  std::shared_ptr<const Toolkit> toolkit_;
};

}  // namespace

bool IsPtxJobOption(absl::string_view option) {
  return option.size() == 3 && option[0] == '-' && option[1] == 'O' && option[2] >= '0' &&
         option[2] <= '3';
}

std::string RandomSeedFor(const KernelId& id, const Target& target, absl::string_view toolkit_id) {
  // Tagged framing: fixed-size id, then length-prefixed strings.
  std::string target_text = target.WithKind(TargetKind::kPtx).ToString();
  std::string framing = "kcache.seed";
  framing.push_back('\0');
  framing.append(id.Bytes().data(), id.Bytes().size());
  framing.push_back(static_cast<char>(target_text.size()));
  framing.append(target_text);
  framing.push_back(static_cast<char>(toolkit_id.size()));
  framing.append(toolkit_id.data(), toolkit_id.size());
  std::string hex = Sha256Hex(framing);
  // 32 bits: NVRTC 13.0 uses a numeric seed of up to 32 bits verbatim, but larger numbers
  // (e.g. 0x0123456789abcdef) give different output from run to run.
  return absl::StrCat("0x", hex.substr(0, 8));
}

std::unique_ptr<Compiler> NewNvrtcCompiler(std::shared_ptr<const Toolkit> toolkit) {
  return std::make_unique<NvrtcCompiler>(std::move(toolkit));
}

std::string CompileLogOf(const absl::Status& status) {
  auto log = status.GetPayload(kCompileLogPayload);
  return log.has_value() ? std::string(*log) : std::string();
}

std::vector<ArtifactKey> CompileJob::ExpectedKeys(const std::string& toolkit_id) const {
  if (!this->ptx.empty()) return {fatbin::PtxSassKey(id, target, toolkit_id)};
  Target ptx = target.WithKind(TargetKind::kPtx);
  std::vector<ArtifactKey> keys;
  if (target.kind == TargetKind::kSass) {
    keys.push_back(ArtifactKey{id, ArtifactKind::kCubin, target, toolkit_id, 0});
  }
  keys.push_back(ArtifactKey{id, ArtifactKind::kPtx, ptx, toolkit_id, 0});
  if (want_ltoir) keys.push_back(ArtifactKey{id, ArtifactKind::kLtoir, ptx, toolkit_id, 0});
  return keys;
}

}  // namespace kcache
