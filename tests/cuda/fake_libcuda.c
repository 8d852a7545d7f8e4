/* A recording stand-in for the CUDA driver (libcuda.so.1), for the tests of kcache's libcuda.so.1
 * stand-in on machines without a GPU (tests/integration/cuda_standin_test.cc): it answers the
 * few driver calls a program needs to load code, and appends one line per module or library load
 * to $FAKE_CUDA_LOG saying what image it was given.
 *
 *   FAKE_CUDA_CC         device compute capabilities, comma-separated ("8.6,8.9": device 0 is
 *                        8.6, device 1 is 8.9); default "8.6"
 *   FAKE_CUDA_DRIVER     cuDriverGetVersion's answer; default 13000
 *   FAKE_CUDA_LOG        the file each load appends its line to (one write, O_APPEND):
 *                        FUNCTION IMAGE KIND SIZE SM FNV1A64 RESULT
 *                        IMAGE the pointer given (%p); KIND elf, fatbin, wrapper (a
 *                        __fatBinC_Wrapper_t: SIZE and FNV1A64 are its fatbin's), ptx or other;
 *                        SM the cubin's (86), 0 for other kinds; FNV1A64 of SIZE bytes, in hex;
 *                        RESULT the CUresult answered
 *   FAKE_CUDA_REFUSE_ELF =1: every ELF image is CUDA_ERROR_INVALID_IMAGE
 *   FAKE_CUDA_CONTEXT_MS milliseconds cuDevicePrimaryCtxRetain takes, as a real driver's first
 *                        context does (bench/ptx_libraries); default 0
 * A cubin for another SM than the device's (every device's, for cuLibraryLoadData) is
 * CUDA_ERROR_NO_BINARY_FOR_GPU; fatbins and PTX load (as if the driver compiled their PTX). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/cuda/fatbin_wrapper.h"

#define EXPORT __attribute__((visibility("default")))

/* The CUresult values answered (/usr/local/cuda/include/cuda.h). */
enum {
  kSuccess = 0,
  kInvalidValue = 1,
  kNotInitialized = 3,
  kInvalidDevice = 101,
  kInvalidImage = 200,
  kInvalidContext = 201,
  kNoBinaryForGpu = 209,
  kInvalidHandle = 400,
  kNotFound = 500,
  kNotSupported = 801,
};

enum { kAttributeCcMajor = 75, kAttributeCcMinor = 76 };
enum { kMaxDevices = 16 };
#define kFatbinMagic 0xBA55ED50u
#define kEmCuda 190

typedef struct {
  int device;
} FakeContext;

static int initialized;
static int device_count;
static int device_cc[kMaxDevices]; /* major * 10 + minor */
static FakeContext contexts[kMaxDevices];
static __thread FakeContext* current;

static void ReadDevices(void) {
  const char* list = getenv("FAKE_CUDA_CC");
  if (list == NULL || *list == '\0') list = "8.6";
  device_count = 0;
  while (*list != '\0' && device_count < kMaxDevices) {
    char* end;
    long major = strtol(list, &end, 10);
    long minor = *end == '.' ? strtol(end + 1, &end, 10) : 0;
    device_cc[device_count] = (int)(major * 10 + minor);
    contexts[device_count].device = device_count;
    ++device_count;
    list = *end == ',' ? end + 1 : end + strlen(end);
  }
}

EXPORT int cuInit(unsigned flags) {
  if (flags != 0) return kInvalidValue;
  if (!initialized) ReadDevices();
  initialized = 1;
  return kSuccess;
}

EXPORT int cuDriverGetVersion(int* version) {
  if (version == NULL) return kInvalidValue;
  const char* value = getenv("FAKE_CUDA_DRIVER");
  *version = value != NULL && *value != '\0' ? atoi(value) : 13000;
  return kSuccess;
}

EXPORT int cuDeviceGetCount(int* count) {
  if (!initialized) return kNotInitialized;
  if (count == NULL) return kInvalidValue;
  *count = device_count;
  return kSuccess;
}

EXPORT int cuDeviceGet(int* device, int ordinal) {
  if (!initialized) return kNotInitialized;
  if (device == NULL) return kInvalidValue;
  if (ordinal < 0 || ordinal >= device_count) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

EXPORT int cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (!initialized) return kNotInitialized;
  if (value == NULL) return kInvalidValue;
  if (device < 0 || device >= device_count) return kInvalidDevice;
  *value = attribute == kAttributeCcMajor   ? device_cc[device] / 10
           : attribute == kAttributeCcMinor ? device_cc[device] % 10
                                            : 0;
  return kSuccess;
}

EXPORT int cuDeviceGetName(char* name, int length, int device) {
  if (!initialized) return kNotInitialized;
  if (name == NULL || length <= 0) return kInvalidValue;
  if (device < 0 || device >= device_count) return kInvalidDevice;
  snprintf(name, (size_t)length, "Fake CUDA device %d.%d", device_cc[device] / 10,
           device_cc[device] % 10);
  return kSuccess;
}

EXPORT int cuDevicePrimaryCtxRetain(void** context, int device) {
  if (!initialized) return kNotInitialized;
  if (context == NULL) return kInvalidValue;
  if (device < 0 || device >= device_count) return kInvalidDevice;
  const char* ms = getenv("FAKE_CUDA_CONTEXT_MS");
  if (ms != NULL && atoi(ms) > 0) usleep((useconds_t)atoi(ms) * 1000u);
  *context = &contexts[device];
  return kSuccess;
}

EXPORT int cuDevicePrimaryCtxRelease_v2(int device) {
  if (!initialized) return kNotInitialized;
  return device < 0 || device >= device_count ? kInvalidDevice : kSuccess;
}

EXPORT int cuDevicePrimaryCtxRelease(int device) { return cuDevicePrimaryCtxRelease_v2(device); }

EXPORT int cuCtxSetCurrent(void* context) {
  if (!initialized) return kNotInitialized;
  FakeContext* fake = context;
  if (fake != NULL && (fake < contexts || fake >= contexts + device_count)) return kInvalidContext;
  current = fake;
  return kSuccess;
}

EXPORT int cuCtxGetCurrent(void** context) {
  if (!initialized) return kNotInitialized;
  if (context == NULL) return kInvalidValue;
  *context = current;
  return kSuccess;
}

EXPORT int cuCtxGetDevice(int* device) {
  if (!initialized) return kNotInitialized;
  if (device == NULL) return kInvalidValue;
  if (current == NULL) return kInvalidContext;
  *device = current->device;
  return kSuccess;
}

/* What an image is, as the log names it, and the bytes it covers. */
typedef struct {
  const char* kind;
  const unsigned char* bytes;
  uint64_t size;
  int sm; /* a cubin's, else 0 */
} Image;

/* A CUDA ELF's extent (its section and program header tables' ends) and SM (e_flags bits
 * 8..15, as core/cubin.cc CubinSmArch reads them); sm 0 when it is not a 64-bit little-endian
 * EM_CUDA file with an SM there. */
static void ReadElf(const unsigned char* bytes, Image* image) {
  Elf64_Ehdr header;
  memcpy(&header, bytes, sizeof header);
  uint64_t sections = header.e_shoff + (uint64_t)header.e_shnum * header.e_shentsize;
  uint64_t programs = header.e_phoff + (uint64_t)header.e_phnum * header.e_phentsize;
  image->size = sections > programs ? sections : programs;
  if (image->size < sizeof header) image->size = sizeof header;
  int sm = (int)((header.e_flags >> 8) & 0xff);
  int cuda = header.e_ident[EI_CLASS] == ELFCLASS64 && header.e_ident[EI_DATA] == ELFDATA2LSB &&
             header.e_machine == kEmCuda;
  image->sm = cuda && sm >= 10 ? sm : 0;
}

static Image Classify(const void* data) {
  Image image = {"other", data, 0, 0};
  const unsigned char* bytes = data;
  uint32_t magic;
  memcpy(&magic, bytes, sizeof magic);
  if (memcmp(bytes, ELFMAG, SELFMAG) == 0) {
    image.kind = "elf";
    ReadElf(bytes, &image);
  } else if (magic == kFatbinMagic) {
    uint64_t data_size;
    memcpy(&data_size, bytes + 8, sizeof data_size);
    image.kind = "fatbin";
    image.size = 16 + data_size;
  } else if (magic == KCACHE_FATBIN_WRAPPER_MAGIC) {
    const FatbinWrapper* wrapper = data;
    image = Classify(wrapper->data);
    image.kind = "wrapper";
  } else if (strstr((const char*)bytes, ".target") != NULL) {
    image.kind = "ptx";
    image.size = strlen((const char*)bytes);
  }
  return image;
}

static uint64_t Fnv1a64(const unsigned char* bytes, uint64_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

/* Whether a cubin for `sm` runs on every device in `devices` (n of them). */
static int Runs(int sm, const int* devices, int n) {
  for (int i = 0; i < n; ++i) {
    if (device_cc[devices[i]] != sm) return 0;
  }
  return 1;
}

/* What the driver answers for `data` on `devices`, logged. */
static int Load(const char* function, const void* data, const int* devices, int n) {
  Image image = Classify(data);
  int result = kSuccess;
  if (strcmp(image.kind, "elf") == 0) {
    const char* refuse = getenv("FAKE_CUDA_REFUSE_ELF");
    if (refuse != NULL && strcmp(refuse, "1") == 0) {
      result = kInvalidImage;
    } else if (image.sm == 0) {
      result = kInvalidImage;
    } else if (!Runs(image.sm, devices, n)) {
      result = kNoBinaryForGpu;
    }
  } else if (strcmp(image.kind, "other") == 0) {
    result = kInvalidImage;
  }
  const char* path = getenv("FAKE_CUDA_LOG");
  if (path != NULL && *path != '\0') {
    char line[512];
    int length = snprintf(line, sizeof line, "%s %p %s %llu %d %016llx %d\n", function, data,
                          image.kind, (unsigned long long)image.size, image.sm,
                          (unsigned long long)Fnv1a64(image.bytes, image.size), result);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (write(fd, line, (size_t)length) != length) perror("fake libcuda: FAKE_CUDA_LOG");
      close(fd);
    }
  }
  return result;
}

/* A module or library handle: something to free. */
static int NewHandle(void** handle) {
  *handle = malloc(1);
  return *handle != NULL ? kSuccess : 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}

static int LoadModule(const char* function, void** module, const void* image) {
  if (!initialized) return kNotInitialized;
  if (module == NULL || image == NULL) return kInvalidValue;
  if (current == NULL) return kInvalidContext;
  int result = Load(function, image, &current->device, 1);
  return result != kSuccess ? result : NewHandle(module);
}

EXPORT int cuModuleLoadData(void** module, const void* image) {
  return LoadModule("cuModuleLoadData", module, image);
}

EXPORT int cuModuleLoadDataEx(void** module, const void* image, unsigned num_options, int* options,
                              void** option_values) {
  if (num_options > 0 && (options == NULL || option_values == NULL)) return kInvalidValue;
  return LoadModule("cuModuleLoadDataEx", module, image);
}

EXPORT int cuModuleLoadFatBinary(void** module, const void* fatbin) {
  return LoadModule("cuModuleLoadFatBinary", module, fatbin);
}

EXPORT int cuModuleUnload(void* module) {
  if (!initialized) return kNotInitialized;
  if (module == NULL) return kInvalidHandle;
  free(module);
  return kSuccess;
}

EXPORT int cuLibraryLoadData(void** library, const void* code, int* jit_options,
                             void** jit_option_values, unsigned num_jit_options,
                             int* library_options, void** library_option_values,
                             unsigned num_library_options) {
  if (!initialized) return kNotInitialized;
  if (library == NULL || code == NULL) return kInvalidValue;
  if (num_jit_options > 0 && (jit_options == NULL || jit_option_values == NULL)) {
    return kInvalidValue;
  }
  if (num_library_options > 0 && (library_options == NULL || library_option_values == NULL)) {
    return kInvalidValue;
  }
  int devices[kMaxDevices];
  for (int i = 0; i < device_count; ++i) devices[i] = i;
  int result = Load("cuLibraryLoadData", code, devices, device_count);
  return result != kSuccess ? result : NewHandle(library);
}

EXPORT int cuLibraryUnload(void* library) {
  if (!initialized) return kNotInitialized;
  if (library == NULL) return kInvalidHandle;
  free(library);
  return kSuccess;
}

EXPORT int cuGetErrorString(int error, const char** text) {
  if (text == NULL) return kInvalidValue;
  switch (error) {
    case kSuccess:
      *text = "no error";
      break;
    case kInvalidValue:
      *text = "invalid argument";
      break;
    case kNotInitialized:
      *text = "initialization error";
      break;
    case kInvalidDevice:
      *text = "invalid device ordinal";
      break;
    case kInvalidImage:
      *text = "device kernel image is invalid";
      break;
    case kInvalidContext:
      *text = "invalid device context";
      break;
    case kNoBinaryForGpu:
      *text = "no kernel image is available for execution on the device";
      break;
    case kInvalidHandle:
      *text = "invalid resource handle";
      break;
    case kNotFound:
      *text = "named symbol not found";
      break;
    case kNotSupported:
      *text = "operation not supported";
      break;
    default:
      *text = NULL;
      return kInvalidValue;
  }
  return kSuccess;
}

/* This library's own handle: its functions, not those of whatever was loaded before it. */
static void* Self(void) {
  static void* self;
  if (self == NULL) {
    Dl_info info;
    if (dladdr((void*)&cuInit, &info) != 0) self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  }
  return self;
}

/* The CUdriverProcAddressQueryResult values. */
enum { kProcFound = 0, kProcNotFound = 1 };

EXPORT int cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                               unsigned long long flags, int* status) {
  (void)cuda_version;
  (void)flags;
  if (symbol == NULL || pfn == NULL) return kInvalidValue;
  /* The names cuda.h maps to a later version answer that version, as the driver does. */
  static const char* const kVersioned[][2] = {
      {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2"},
      {"cuGetProcAddress", "cuGetProcAddress_v2"},
  };
  const char* name = symbol;
  for (size_t i = 0; i < sizeof kVersioned / sizeof kVersioned[0]; ++i) {
    if (strcmp(symbol, kVersioned[i][0]) == 0) name = kVersioned[i][1];
  }
  void* self = Self();
  *pfn = self != NULL ? dlsym(self, name) : NULL;
  if (status != NULL) *status = *pfn != NULL ? kProcFound : kProcNotFound;
  return *pfn != NULL ? kSuccess : kNotFound;
}

EXPORT int cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                            unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, NULL);
}

EXPORT int cuGetExportTable(const void** table, const void* id) {
  (void)id;
  if (table != NULL) *table = NULL;
  return kNotSupported;
}
