// What the files of the C ABI (kcache/kcache_c.h) share: the kernel handle and the calling
// thread's last error. Internal to libkcache.
#ifndef KCACHE_CLIENT_LIB_C_API_INTERNAL_H_
#define KCACHE_CLIENT_LIB_C_API_INTERNAL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kcache/kcache.h"
#include "kcache/kcache_c.h"

struct kcache_client {
  std::unique_ptr<kcache::client::Client> client;
  kcache::client::CallOptions call;  // of every resolve (kcache_set_progress_callback)
};

struct kcache_kernel {
  kcache::client::FetchedKernel kernel;
  std::string kind, rule, served_from;
};

namespace kcache::client::c_api {

// Sets the calling thread's last error to the status's message; returns its code.
int Fail(const absl::Status& status);
// Sets the last error to `message`; returns `code`.
int FailWith(int code, const char* message);
// Clears the last error; returns KCACHE_OK.
int Succeed();
// A new kernel handle owning `kernel`.
kcache_kernel* NewKernel(FetchedKernel kernel);
// The C++ batch of `count` kernel refs; InvalidArgument naming the first ref without exactly
// one field set.
absl::Status ToRefs(const kcache_kernel_ref* kernels, size_t count, std::vector<KernelRef>* refs);

}  // namespace kcache::client::c_api

#endif  // KCACHE_CLIENT_LIB_C_API_INTERNAL_H_
