// How a ResolveMany batch is split into gRPC calls (client/lib/many_calls.h): in order, each
// call within kcached's bounds (kMaxResolveManyEntries entries, kMaxUnaryMessageBytes bytes),
// in as few calls as the bounds allow, each entry's kernel index beside it; a request over the
// byte bound goes alone.
#include "client/lib/many_calls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/protocol.h"
#include "kcache/v1/kcache.pb.h"

namespace kcache::client {
namespace {

// A request named after `tag`, padded so that its encoding is `bytes` long (0: unpadded).
v1::ResolveRequest Request(size_t tag, size_t bytes = 0) {
  v1::ResolveRequest request;
  request.set_kernel_name(absl::StrCat("k", tag, "-"));
  if (bytes == 0) return request;
  size_t pad = bytes - request.ByteSizeLong();
  while (true) {  // the name's length prefix grows with the padding
    request.set_kernel_name(absl::StrCat("k", tag, "-", std::string(pad, 'x')));
    if (request.ByteSizeLong() <= bytes) break;
    pad -= request.ByteSizeLong() - bytes;
  }
  EXPECT_EQ(request.ByteSizeLong(), bytes);
  return request;
}

// The batch's kernel index of request k: not k itself, so that a mix-up shows.
size_t KernelOf(size_t k) { return 3 * k + 1; }

// Packs `requests`, request k for KernelOf(k).
std::vector<ManyCall> Pack(const std::vector<v1::ResolveRequest>& requests) {
  std::vector<size_t> kernel_of;
  for (size_t k = 0; k < requests.size(); ++k) kernel_of.push_back(KernelOf(k));
  return PackManyCalls(requests, kernel_of);
}

std::vector<size_t> EntriesPerCall(const std::vector<ManyCall>& calls) {
  std::vector<size_t> entries;
  for (const ManyCall& call : calls) {
    EXPECT_EQ(call.sent.size(), static_cast<size_t>(call.request.kernels_size()));
    entries.push_back(call.sent.size());
  }
  return entries;
}

// The calls, one after another, hold exactly `requests`, in order, each beside its kernel.
void ExpectInOrder(const std::vector<ManyCall>& calls,
                   const std::vector<v1::ResolveRequest>& requests) {
  size_t k = 0;
  for (const ManyCall& call : calls) {
    for (int e = 0; e < call.request.kernels_size(); ++e, ++k) {
      ASSERT_LT(k, requests.size());
      EXPECT_EQ(call.request.kernels(e).kernel_name(), requests[k].kernel_name());
      EXPECT_EQ(call.sent[e], KernelOf(k));
    }
  }
  EXPECT_EQ(k, requests.size());
}

TEST(PackManyCallsTest, NoRequestsMakeNoCalls) { EXPECT_TRUE(Pack({}).empty()); }

TEST(PackManyCallsTest, SmallBatchIsOneCallInOrderWithItsKernels) {
  std::vector<v1::ResolveRequest> requests;
  for (size_t k = 0; k < 5; ++k) requests.push_back(Request(k));
  std::vector<ManyCall> calls = Pack(requests);
  EXPECT_EQ(EntriesPerCall(calls), std::vector<size_t>{5});
  ExpectInOrder(calls, requests);
}

TEST(PackManyCallsTest, CallHoldsAtMostMaxResolveManyEntries) {
  std::vector<v1::ResolveRequest> requests;
  for (size_t k = 0; k < 2 * kMaxResolveManyEntries + 1; ++k) requests.push_back(Request(k));
  std::vector<ManyCall> calls = Pack(requests);
  EXPECT_EQ(EntriesPerCall(calls),
            (std::vector<size_t>{kMaxResolveManyEntries, kMaxResolveManyEntries, 1}));
  ExpectInOrder(calls, requests);
}

TEST(PackManyCallsTest, CallStaysWithinMaxUnaryMessageBytes) {
  // Three 1 MiB requests fit in a call of kMaxUnaryMessageBytes (4 MiB less 64 KiB); four do not.
  std::vector<v1::ResolveRequest> requests;
  for (size_t k = 0; k < 10; ++k) requests.push_back(Request(k, 1 << 20));
  std::vector<ManyCall> calls = Pack(requests);
  EXPECT_EQ(EntriesPerCall(calls), (std::vector<size_t>{3, 3, 3, 1}));
  for (const ManyCall& call : calls) EXPECT_LE(call.request.ByteSizeLong(), kMaxUnaryMessageBytes);
  ExpectInOrder(calls, requests);
}

TEST(PackManyCallsTest, RequestsThatFillTheBytesExactlyShareACall) {
  // Each entry counts its bytes and 8 more for its tag and length.
  size_t first = 1'000'000;
  size_t second = kMaxUnaryMessageBytes - (first + 8) - 8;
  std::vector<ManyCall> calls = Pack({Request(0, first), Request(1, second)});
  EXPECT_EQ(EntriesPerCall(calls), std::vector<size_t>{2});
  calls = Pack({Request(0, first), Request(1, second + 1)});
  EXPECT_EQ(EntriesPerCall(calls), (std::vector<size_t>{1, 1}));
}

TEST(PackManyCallsTest, RequestOverTheByteBoundGoesAlone) {
  std::vector<v1::ResolveRequest> requests = {Request(0), Request(1, kMaxUnaryMessageBytes + 1),
                                              Request(2), Request(3)};
  std::vector<ManyCall> calls = Pack(requests);
  EXPECT_EQ(EntriesPerCall(calls), (std::vector<size_t>{1, 1, 2}));
  ExpectInOrder(calls, requests);
}

}  // namespace
}  // namespace kcache::client
