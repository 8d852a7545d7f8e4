// The C ABI (kcache/kcache_c.h) over the C++ client.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/lib/c_api_internal.h"
#include "core/version.h"
#include "kcache/device.h"
#include "kcache/kcache.h"
#include "kcache/kcache_c.h"

using kcache::client::Client;
using kcache::client::ClientOptions;
using kcache::client::Device;
using kcache::client::FetchedKernel;
using kcache::client::KernelSource;

// The manifest's sources and, for each, the pointer arrays its kcache_source points into.
struct kcache_manifest {
  struct Entry {
    std::vector<const char*> header_names, header_contents, options, name_expressions;
  };
  std::vector<KernelSource> sources;
  std::vector<Entry> entries;
  std::vector<kcache_source> views;
};

using kcache::client::c_api::Fail;
using kcache::client::c_api::FailWith;
using kcache::client::c_api::NewKernel;

namespace {

thread_local std::string last_error;

std::string Str(const char* text) { return text == nullptr ? "" : text; }

Device ToDevice(const kcache_device* d) {
  return Device{d->sm_major, d->sm_minor, d->driver_version};
}

int Finish(absl::StatusOr<FetchedKernel> result, kcache_kernel** out) {
  if (!result.ok()) return Fail(result.status());
  *out = NewKernel(*std::move(result));
  last_error.clear();
  return KCACHE_OK;
}

KernelSource ToSource(const kcache_source* source) {
  KernelSource s;
  s.name = Str(source->name);
  s.source = Str(source->source);
  for (size_t i = 0; i < source->num_headers; ++i) {
    s.headers[Str(source->header_names[i])] = Str(source->header_contents[i]);
  }
  for (size_t i = 0; i < source->num_options; ++i) s.options.push_back(Str(source->options[i]));
  for (size_t i = 0; i < source->num_name_expressions; ++i) {
    s.name_expressions.push_back(Str(source->name_expressions[i]));
  }
  s.min_arch = source->min_arch;
  s.max_arch = source->max_arch;
  return s;
}

// A duration in whole milliseconds, clamped into an int32_t (a negative one stays negative).
int32_t Int32Millis(absl::Duration d) {
  return static_cast<int32_t>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(d), INT32_MIN, INT32_MAX));
}

}  // namespace

namespace kcache::client::c_api {

int Fail(const absl::Status& status) {
  last_error = std::string(status.message());
  return static_cast<int>(status.code());
}

int FailWith(int code, const char* message) {
  last_error = message;
  return code;
}

int Succeed() {
  last_error.clear();
  return KCACHE_OK;
}

kcache_kernel* NewKernel(FetchedKernel kernel) {
  auto* k = new kcache_kernel;
  k->kernel = std::move(kernel);
  k->kind = std::string(ArtifactKindName(k->kernel.kind));
  k->rule = std::string(ServeRuleName(k->kernel.rule));
  k->served_from = std::string(ServedFromName(k->kernel.served_from));
  return k;
}

absl::Status ToRefs(const kcache_kernel_ref* kernels, size_t count, std::vector<KernelRef>* refs) {
  refs->reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const kcache_kernel_ref& r = kernels[i];
    int given = (r.source != nullptr) + (r.id != nullptr) + (r.name != nullptr);
    if (given != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernels[", i, "]: set exactly one of source, id and name"));
    }
    refs->push_back(r.source != nullptr ? KernelRef(ToSource(r.source))
                    : r.id != nullptr   ? KernelRef::Id(r.id)
                                        : KernelRef::Name(r.name));
  }
  return absl::OkStatus();
}

}  // namespace kcache::client::c_api

extern "C" {

const char* kcache_version(void) { return kcache::kVersion; }
const char* kcache_last_error(void) { return last_error.c_str(); }

void kcache_options_init(kcache_options* o) {
  if (o == nullptr) return;
  ClientOptions defaults;
  o->address = nullptr;
  o->client_name = nullptr;
  o->toolkit_root = nullptr;
  o->deadline_ms = absl::ToInt64Milliseconds(defaults.deadline);
  o->local_compile_fallback = defaults.local_compile_fallback ? 1 : 0;
  o->breaker_failures = defaults.breaker_failures;
  o->breaker_cooldown_ms = absl::ToInt64Milliseconds(defaults.breaker_cooldown);
  o->fast_path = defaults.fast_path ? 1 : 0;
  o->wait_limit_ms = Int32Millis(defaults.wait_limit);
  o->startup_grace_ms = Int32Millis(defaults.startup_grace);
  std::fill(std::begin(o->reserved), std::end(o->reserved), 0);
}

int kcache_connect(const kcache_options* options, kcache_client** out) {
  if (out == nullptr) return FailWith(KCACHE_INVALID_ARGUMENT, "out is NULL");
  *out = nullptr;
  kcache_options o;
  kcache_options_init(&o);
  if (options != nullptr) o = *options;
  ClientOptions opts;
  if (!Str(o.address).empty()) opts.address = o.address;
  opts.client_name = Str(o.client_name);
  opts.toolkit_root = Str(o.toolkit_root);
  opts.deadline = absl::Milliseconds(o.deadline_ms);
  opts.local_compile_fallback = o.local_compile_fallback != 0;
  opts.breaker_failures = o.breaker_failures;
  opts.breaker_cooldown = absl::Milliseconds(o.breaker_cooldown_ms);
  opts.fast_path = o.fast_path != 0;
  opts.wait_limit = absl::Milliseconds(o.wait_limit_ms);
  opts.startup_grace = absl::Milliseconds(o.startup_grace_ms);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(opts);
  if (!client.ok()) return Fail(client.status());
  *out = new kcache_client{*std::move(client), {}};
  last_error.clear();
  return KCACHE_OK;
}

void kcache_client_free(kcache_client* client) { delete client; }

int kcache_resolve(kcache_client* client, const kcache_source* source, const kcache_device* device,
                   kcache_kernel** out) {
  if (client == nullptr || source == nullptr || device == nullptr || out == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT, "client, source, device and out must not be NULL");
  }
  *out = nullptr;
  return Finish(client->client->Resolve(ToSource(source), ToDevice(device), client->call), out);
}

int kcache_resolve_many(kcache_client* client, const kcache_kernel_ref* kernels, size_t count,
                        const kcache_device* device, kcache_resolve_many_callback callback,
                        void* context) {
  if (client == nullptr || (kernels == nullptr && count > 0) || device == nullptr ||
      callback == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT,
                    "client, kernels, device and callback must not be NULL");
  }
  std::vector<kcache::client::KernelRef> refs;
  if (absl::Status s = kcache::client::c_api::ToRefs(kernels, count, &refs); !s.ok()) {
    return Fail(s);
  }
  client->client->ResolveMany(
      refs, ToDevice(device),
      [&](size_t index, absl::StatusOr<FetchedKernel> result) {
        if (result.ok()) {
          callback(context, index, KCACHE_OK, "", NewKernel(*std::move(result)));
        } else {
          std::string message(result.status().message());
          callback(context, index, static_cast<int>(result.status().code()), message.c_str(),
                   nullptr);
        }
      },
      client->call);
  last_error.clear();
  return KCACHE_OK;
}

int kcache_resolve_by_name(kcache_client* client, const char* name, const kcache_device* device,
                           kcache_kernel** out) {
  if (client == nullptr || name == nullptr || device == nullptr || out == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT, "client, name, device and out must not be NULL");
  }
  *out = nullptr;
  return Finish(client->client->ResolveByName(name, ToDevice(device), client->call), out);
}

int kcache_resolve_by_id(kcache_client* client, const char* hex_id, const kcache_device* device,
                         kcache_kernel** out) {
  if (client == nullptr || hex_id == nullptr || device == nullptr || out == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT, "client, hex_id, device and out must not be NULL");
  }
  *out = nullptr;
  return Finish(client->client->ResolveById(hex_id, ToDevice(device), client->call), out);
}

void kcache_kernel_free(kcache_kernel* kernel) { delete kernel; }

const void* kcache_kernel_data(const kcache_kernel* k, size_t* size) {
  if (size != nullptr) *size = k->kernel.data().size();
  return k->kernel.data().data();
}
const char* kcache_kernel_kind(const kcache_kernel* k) { return k->kind.c_str(); }
const char* kcache_kernel_target(const kcache_kernel* k) { return k->kernel.target.c_str(); }
const char* kcache_kernel_id(const kcache_kernel* k) { return k->kernel.kernel_id.c_str(); }
const char* kcache_kernel_name(const kcache_kernel* k) { return k->kernel.kernel_name.c_str(); }
const char* kcache_kernel_rule(const kcache_kernel* k) { return k->rule.c_str(); }
const char* kcache_kernel_reason(const kcache_kernel* k) { return k->kernel.reason.c_str(); }
const char* kcache_kernel_served_from(const kcache_kernel* k) { return k->served_from.c_str(); }
int kcache_kernel_needs_jit(const kcache_kernel* k) { return k->kernel.needs_jit ? 1 : 0; }
int kcache_kernel_from_daemon(const kcache_kernel* k) { return k->kernel.from_daemon() ? 1 : 0; }
int64_t kcache_kernel_micros(const kcache_kernel* k) { return k->kernel.micros; }

const char* kcache_kernel_lowered_name(const kcache_kernel* k, const char* name_expression) {
  if (name_expression == nullptr) return nullptr;
  for (const auto& [expr, lowered] : k->kernel.lowered_names) {
    if (expr == name_expression) return lowered.c_str();
  }
  return nullptr;
}

const char* kcache_kernel_toolkit(const kcache_kernel* k) { return k->kernel.toolkit.c_str(); }
const char* kcache_kernel_compile_log(const kcache_kernel* k) {
  return k->kernel.compile_log.c_str();
}
size_t kcache_kernel_lowered_count(const kcache_kernel* k) {
  return k->kernel.lowered_names.size();
}
const char* kcache_kernel_lowered_at(const kcache_kernel* k, size_t i,
                                     const char** name_expression) {
  if (i >= k->kernel.lowered_names.size()) {
    if (name_expression != nullptr) *name_expression = nullptr;
    return nullptr;
  }
  const auto& [expr, lowered] = k->kernel.lowered_names[i];
  if (name_expression != nullptr) *name_expression = expr.c_str();
  return lowered.c_str();
}

int kcache_detect_devices(kcache_device* devices, int capacity, int* count) {
  if (count != nullptr) *count = 0;
  absl::StatusOr<std::vector<kcache::client::GpuInfo>> gpus = kcache::client::DetectDevices();
  if (!gpus.ok()) return Fail(gpus.status());
  for (int i = 0; i < static_cast<int>(gpus->size()) && i < capacity && devices != nullptr; ++i) {
    const Device& d = (*gpus)[i].device;
    devices[i] = kcache_device{d.sm_major, d.sm_minor, d.driver_version};
  }
  if (count != nullptr) *count = static_cast<int>(gpus->size());
  last_error.clear();
  return KCACHE_OK;
}

int kcache_stat_json(kcache_client* client, char** json) {
  if (client == nullptr || json == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT, "client and json must not be NULL");
  }
  *json = nullptr;
  absl::StatusOr<kcache::client::DaemonStats> stats = client->client->Stat();
  if (!stats.ok()) return Fail(stats.status());
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& c : stats->counters) counters[c.name] = c.value;
  nlohmann::json out = {{"counters", counters},
                        {"store_artifacts", stats->store_artifacts},
                        {"store_bytes", stats->store_bytes},
                        {"memory_bytes", stats->memory_bytes},
                        {"memory_entries", stats->memory_entries},
                        {"toolkits", stats->toolkits},
                        {"uptime_seconds", stats->uptime_seconds}};
  std::string text = out.dump();
  *json = static_cast<char*>(std::malloc(text.size() + 1));
  std::memcpy(*json, text.c_str(), text.size() + 1);
  last_error.clear();
  return KCACHE_OK;
}

void kcache_string_free(char* text) { std::free(text); }

int kcache_manifest_load(const char* path, kcache_manifest** out) {
  if (path == nullptr || out == nullptr) {
    return FailWith(KCACHE_INVALID_ARGUMENT, "path and out must not be NULL");
  }
  *out = nullptr;
  absl::StatusOr<std::vector<KernelSource>> sources = kcache::client::LoadManifestKernels(path);
  if (!sources.ok()) return Fail(sources.status());
  auto m = std::make_unique<kcache_manifest>();
  m->sources = *std::move(sources);
  m->entries.resize(m->sources.size());
  m->views.resize(m->sources.size());
  for (size_t i = 0; i < m->sources.size(); ++i) {
    const KernelSource& s = m->sources[i];
    kcache_manifest::Entry& e = m->entries[i];
    for (const auto& [name, content] : s.headers) {
      e.header_names.push_back(name.c_str());
      e.header_contents.push_back(content.c_str());
    }
    for (const std::string& o : s.options) e.options.push_back(o.c_str());
    for (const std::string& n : s.name_expressions) e.name_expressions.push_back(n.c_str());
    m->views[i] = kcache_source{s.name.c_str(),
                                s.source.c_str(),
                                e.header_names.data(),
                                e.header_contents.data(),
                                e.header_names.size(),
                                e.options.data(),
                                e.options.size(),
                                e.name_expressions.data(),
                                e.name_expressions.size(),
                                s.min_arch,
                                s.max_arch};
  }
  *out = m.release();
  last_error.clear();
  return KCACHE_OK;
}

size_t kcache_manifest_count(const kcache_manifest* m) { return m->views.size(); }

const kcache_source* kcache_manifest_kernel(const kcache_manifest* m, size_t i) {
  return i < m->views.size() ? &m->views[i] : nullptr;
}

void kcache_manifest_free(kcache_manifest* m) { delete m; }

}  // extern "C"
