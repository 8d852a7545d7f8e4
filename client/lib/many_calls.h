// How a ResolveMany batch is split into gRPC calls that each stay within kcached's bounds
// (core/protocol.h). Internal to libkcache.
#ifndef KCACHE_CLIENT_LIB_MANY_CALLS_H_
#define KCACHE_CLIENT_LIB_MANY_CALLS_H_

#include <cstddef>
#include <vector>

#include "kcache/v1/kcache.pb.h"

namespace kcache::client {

// One ResolveMany call of a batch.
struct ManyCall {
  v1::ResolveManyRequest request;
  std::vector<size_t> sent;  // request.kernels(k) asks for the batch's kernel sent[k]
};

// Packs `requests` in order into as few calls as fit: a call takes the next request while it
// holds fewer than kMaxResolveManyEntries entries and the request's bytes (with 8 for the
// field's tag and length) keep it within kMaxUnaryMessageBytes; a request that alone is over
// that goes in a call of its own. `requests[k]` asks for the batch's kernel `kernel_of[k]`
// (the two the same size). No calls for no requests.
std::vector<ManyCall> PackManyCalls(std::vector<v1::ResolveRequest> requests,
                                    const std::vector<size_t>& kernel_of);

}  // namespace kcache::client

#endif  // KCACHE_CLIENT_LIB_MANY_CALLS_H_
