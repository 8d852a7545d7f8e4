# Every dependency is a Debian 12 package (scripts/install-deps.sh installs them) except the
# CUDA toolkit, of which only the headers are used at build time: libnvrtc and libnvJitLink
# are dlopen'd at run time and nothing links libcuda.
find_package(absl CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(RocksDB CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(zstd CONFIG REQUIRED)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(JEMALLOC IMPORTED_TARGET jemalloc)
# libseccomp: the compile workers' syscall filter (engine/workers/sandbox.cc).
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
# liblz4: fatbin entries compressed with LZ4 (engine/fatbin/fatbin.cc; zstd ones use libzstd).
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
if(KCACHE_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  include(GoogleTest)
endif()

if(DEFINED ENV{CUDA_HOME})
  set(KCACHE_DEFAULT_CUDA_HOME "$ENV{CUDA_HOME}")
else()
  set(KCACHE_DEFAULT_CUDA_HOME "/usr/local/cuda")
endif()
set(KCACHE_CUDA_HOME "${KCACHE_DEFAULT_CUDA_HOME}" CACHE PATH "CUDA toolkit root (headers at build time)")
find_path(KCACHE_NVRTC_INCLUDE_DIR nvrtc.h HINTS ${KCACHE_CUDA_HOME}/include NO_DEFAULT_PATH REQUIRED)
find_path(KCACHE_NVJITLINK_INCLUDE_DIR nvJitLink.h HINTS ${KCACHE_CUDA_HOME}/include NO_DEFAULT_PATH REQUIRED)
# Only the API headers: an INTERFACE target so nothing picks up a CUDA library by accident.
add_library(kcache_cuda_headers INTERFACE)
target_include_directories(kcache_cuda_headers SYSTEM INTERFACE ${KCACHE_NVRTC_INCLUDE_DIR})
