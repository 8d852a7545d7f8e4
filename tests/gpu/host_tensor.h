// A pointer argument of a launch-table entry on the host (tests/gpu/launch_plan.h), kept in the
// form the CPU references take (kernels/reference/reference.h): fp32 / fp16 / bf16 tensors as
// floats holding exactly representable values, int32 as int32, fp8 as E4M3 codes.
// DeviceBytes() / FromDeviceBytes() convert to and from what the kernel reads and writes.
// Header-only.
#ifndef KCACHE_TESTS_GPU_HOST_TENSOR_H_
#define KCACHE_TESTS_GPU_HOST_TENSOR_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/reference/launch.h"
#include "kernels/reference/reference.h"

namespace kcache::gpu_test {

namespace launch = ::kcache::reference::launch;

inline size_t ElemBytes(launch::Elem elem) {
  switch (elem) {
    case launch::Elem::kF32:
    case launch::Elem::kI32:
      return 4;
    case launch::Elem::kF16:
    case launch::Elem::kBF16:
      return 2;
    case launch::Elem::kFp8E4M3:
      return 1;
    case launch::Elem::kNone:
      break;
  }
  return 0;
}

inline const char* ElemName(launch::Elem elem) {
  switch (elem) {
    case launch::Elem::kF32:
      return "f32";
    case launch::Elem::kF16:
      return "f16";
    case launch::Elem::kBF16:
      return "bf16";
    case launch::Elem::kI32:
      return "i32";
    case launch::Elem::kFp8E4M3:
      return "fp8_e4m3";
    case launch::Elem::kNone:
      break;
  }
  return "none";
}

// True for element types compared bit for bit (integers and fp8 codes).
inline bool IsExactElem(launch::Elem elem) {
  return elem == launch::Elem::kI32 || elem == launch::Elem::kFp8E4M3;
}

// One pointer argument on the host.
struct Tensor {
  launch::Elem elem = launch::Elem::kNone;
  bool null = false;       // passed as a null pointer (an optional argument left out)
  std::vector<float> f;    // kF32, kF16, kBF16
  std::vector<int32_t> i;  // kI32
  std::vector<uint8_t> q;  // kFp8E4M3 codes

  size_t size() const { return f.size() + i.size() + q.size(); }

  // A tensor of `count` elements, each `byte` repeated in device form.
  static Tensor Filled(launch::Elem elem, size_t count, uint8_t byte) {
    return FromDeviceBytes(elem, std::vector<uint8_t>(count * ElemBytes(elem), byte));
  }

  // Element k as a number (fp8 decoded).
  double Value(size_t k) const {
    switch (elem) {
      case launch::Elem::kI32:
        return i[k];
      case launch::Elem::kFp8E4M3:
        return reference::e4m3_to_float(q[k]);
      default:
        return f[k];
    }
  }

  // Sets element k to `v` rounded to the element type (int32: floor; fp8: saturating RNE).
  void Set(size_t k, double v) {
    const float x = static_cast<float>(v);
    switch (elem) {
      case launch::Elem::kF32:
        f[k] = x;
        break;
      case launch::Elem::kF16:
        f[k] = reference::round_to(reference::DType::kF16, x);
        break;
      case launch::Elem::kBF16:
        f[k] = reference::round_to(reference::DType::kBF16, x);
        break;
      case launch::Elem::kI32:
        i[k] = static_cast<int32_t>(std::floor(v));
        break;
      case launch::Elem::kFp8E4M3:
        q[k] = reference::float_to_e4m3(x);
        break;
      case launch::Elem::kNone:
        break;
    }
  }

  // What the kernel sees: little-endian elements of ElemBytes(elem) each.
  std::vector<uint8_t> DeviceBytes() const {
    std::vector<uint8_t> out(size() * ElemBytes(elem));
    for (size_t k = 0; k < size(); ++k) {
      uint8_t* at = out.data() + k * ElemBytes(elem);
      switch (elem) {
        case launch::Elem::kF32:
          std::memcpy(at, &f[k], 4);
          break;
        case launch::Elem::kI32:
          std::memcpy(at, &i[k], 4);
          break;
        case launch::Elem::kFp8E4M3:
          *at = q[k];
          break;
        case launch::Elem::kF16:
        case launch::Elem::kBF16: {
          const uint16_t bits = elem == launch::Elem::kF16 ? reference::float_to_half(f[k])
                                                           : reference::float_to_bf16(f[k]);
          std::memcpy(at, &bits, 2);
          break;
        }
        case launch::Elem::kNone:
          break;
      }
    }
    return out;
  }

  // The inverse of DeviceBytes; a trailing partial element is ignored.
  static Tensor FromDeviceBytes(launch::Elem elem, const std::vector<uint8_t>& bytes) {
    Tensor t;
    t.elem = elem;
    const size_t width = ElemBytes(elem);
    const size_t count = width == 0 ? 0 : bytes.size() / width;
    for (size_t k = 0; k < count; ++k) {
      const uint8_t* at = bytes.data() + k * width;
      switch (elem) {
        case launch::Elem::kF32: {
          float v;
          std::memcpy(&v, at, 4);
          t.f.push_back(v);
          break;
        }
        case launch::Elem::kI32: {
          int32_t v;
          std::memcpy(&v, at, 4);
          t.i.push_back(v);
          break;
        }
        case launch::Elem::kFp8E4M3:
          t.q.push_back(*at);
          break;
        case launch::Elem::kF16:
        case launch::Elem::kBF16: {
          uint16_t bits;
          std::memcpy(&bits, at, 2);
          t.f.push_back(elem == launch::Elem::kF16 ? reference::half_to_float(bits)
                                                   : reference::bf16_to_float(bits));
          break;
        }
        case launch::Elem::kNone:
          break;
      }
    }
    return t;
  }
};

}  // namespace kcache::gpu_test

#endif  // KCACHE_TESTS_GPU_HOST_TENSOR_H_
