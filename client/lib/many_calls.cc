#include "client/lib/many_calls.h"

#include <utility>

#include "core/protocol.h"

namespace kcache::client {

std::vector<ManyCall> PackManyCalls(std::vector<v1::ResolveRequest> requests,
                                    const std::vector<size_t>& kernel_of) {
  std::vector<ManyCall> calls;
  size_t call_bytes = 0;
  for (size_t k = 0; k < requests.size(); ++k) {
    size_t size = requests[k].ByteSizeLong() + 8;  // + the field's tag and length
    if (calls.empty() || calls.back().sent.size() >= kMaxResolveManyEntries ||
        call_bytes + size > kMaxUnaryMessageBytes) {
      calls.emplace_back();
      call_bytes = 0;
    }
    *calls.back().request.add_kernels() = std::move(requests[k]);
    calls.back().sent.push_back(kernel_of[k]);
    call_bytes += size;
  }
  return calls;
}

}  // namespace kcache::client
