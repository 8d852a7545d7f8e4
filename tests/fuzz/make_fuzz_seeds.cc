// Writes the generated part of the fuzz seed corpus (tests/fuzz/corpus/): stored values for
// value_format_fuzzer and wire requests for request_fuzzer, each prefixed with the selector
// byte its fuzzer reads. Run by hand when a format changes:
//   build/tests/fuzz/make_fuzz_seeds tests/fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/artifact.h"
#include "core/kernel_spec.h"
#include "core/target.h"
#include "daemon/service/wire_convert.h"
#include "engine/store/value_format.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;

bool Write(const fs::path& folder, const std::string& name, char selector,
           const std::string& bytes) {
  fs::create_directories(folder);
  std::ofstream out(folder / name, std::ios::binary | std::ios::trunc);
  out << selector << bytes;
  return out.good();
}

KernelSpec Spec() {
  KernelSpec spec;
  spec.name = "scale";
  spec.source_name = "scale.cu";
  spec.source =
      "#include \"scale_op.h\"\n"
      "template <typename T> __global__ void scale(T* x, T a) { x[threadIdx.x] = "
      "op(x[threadIdx.x], "
      "a); }\n";
  spec.headers["scale_op.h"] =
      "template <typename T> __device__ T op(T x, T a) { return x * a; }\n";
  spec.options = {"-std=c++17", "-DBLOCK=128", "--use_fast_math"};
  spec.name_expressions = {"scale<float>", "scale<double>"};
  return spec;
}

ArtifactMeta Meta(const KernelRecord& record, const std::string& bytes) {
  ArtifactMeta meta;
  meta.key.kernel_id = record.id;
  meta.key.kind = ArtifactKind::kCubin;
  meta.key.target = *ParseTarget("sm_89");
  meta.key.toolkit = "nvrtc-13.0+1a2b3c4d5e6f";
  meta.kernel_name = record.spec.name;
  meta.lowered_names = {{"scale<float>", "_Z5scaleIfEvPT_S0_"},
                        {"scale<double>", "_Z5scaleIdEvPT_S0_"}};
  meta.compile_log = "warning: a warning\n";
  meta.compile_micros = 56000;
  meta.size = bytes.size();
  meta.checksum = PayloadChecksum(bytes);
  meta.created_unix_ms = 1764000000000;
  meta.last_used_unix_ms = 1764000001000;
  meta.min_driver = 13000;
  return meta;
}

// The daemon's own conversion, with an architecture range the seeds exercise.
void FillSpec(const KernelRecord& record, v1::KernelSpec* out) {
  RecordToProto(record, out);
  out->set_min_arch(75);
  out->set_max_arch(120);
}

bool WriteValues(const fs::path& folder, const KernelRecord& record) {
  std::string bytes(600, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 7) % 13);
  ArtifactMeta meta = Meta(record, bytes);
  return Write(folder, "artifact-raw", 0, EncodeArtifactValue(meta, bytes, 0)) &&
         Write(folder, "artifact-zstd", 0, EncodeArtifactValue(meta, bytes, 3)) &&
         Write(folder, "artifact-fix-checksums", 4, EncodeArtifactValue(meta, bytes, 0)) &&
         Write(folder, "artifact-meta", 1, EncodeArtifactMetaValue(meta)) &&
         Write(folder, "kernel-raw", 2, EncodeKernelValue(record, 0)) &&
         Write(folder, "kernel-zstd", 2, EncodeKernelValue(record, 3)) &&
         Write(folder, "kernel-fix-checksums", 6, EncodeKernelValue(record, 0)) &&
         Write(folder, "format-version", 3, EncodeFormatVersion(kStoreFormatVersion));
}

bool WriteRequests(const fs::path& folder, const KernelRecord& record) {
  v1::ResolveRequest by_spec;
  FillSpec(record, by_spec.mutable_spec());
  by_spec.mutable_device()->set_sm_major(8);
  by_spec.mutable_device()->set_sm_minor(9);
  by_spec.mutable_device()->set_driver_version(13000);
  by_spec.set_client("pod-1");
  v1::ResolveRequest by_id;
  by_id.set_kernel_id(std::string(record.id.Bytes()));
  *by_id.mutable_device() = by_spec.device();
  by_id.set_ptx_now(true);
  v1::ResolveRequest by_name;
  by_name.set_kernel_name("scale");
  *by_name.mutable_device() = by_spec.device();
  by_name.set_no_compile(true);
  v1::WarmRequest warm;
  FillSpec(record, warm.add_kernels());
  FillSpec(record, warm.add_kernels());
  warm.mutable_kernels(1)->add_options("-DVARIANT=2");
  for (const char* target : {"7.5", "sm_86", "9.0a", "10.0f", "compute_90"}) {
    warm.add_targets(target);
  }
  warm.set_jobs(2);
  return Write(folder, "resolve-spec", 0, by_spec.SerializeAsString()) &&
         Write(folder, "resolve-id", 0, by_id.SerializeAsString()) &&
         Write(folder, "resolve-name", 0, by_name.SerializeAsString()) &&
         Write(folder, "warm", 1, warm.SerializeAsString());
}

}  // namespace
}  // namespace kcache

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds CORPUS_FOLDER (tests/fuzz/corpus)\n");
    return 2;
  }
  kcache::KernelRecord record;
  record.spec = kcache::Spec();
  record.id = kcache::ComputeKernelId(record.spec);
  record.arch = {75, 120};
  std::filesystem::path corpus(argv[1]);
  if (!kcache::WriteValues(corpus / "value_format", record) ||
      !kcache::WriteRequests(corpus / "request", record)) {
    std::fprintf(stderr, "make_fuzz_seeds: cannot write under %s\n", argv[1]);
    return 1;
  }
  return 0;
}
