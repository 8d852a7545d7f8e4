# Every build setting lives here, in one INTERFACE target that each kcache target links.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

option(KCACHE_BUILD_TESTS "Build the GoogleTest suites" ON)
option(KCACHE_BUILD_BENCH "Build the benchmarks under bench/" ON)
option(KCACHE_WERROR "Treat compiler warnings as errors" OFF)
set(KCACHE_SANITIZE "" CACHE STRING "Sanitizer build: '', address, undefined, address,undefined or thread")

add_library(kcache_settings INTERFACE)
target_compile_options(kcache_settings INTERFACE -Wall -Wextra -Wno-unused-parameter)
if(KCACHE_WERROR)
  target_compile_options(kcache_settings INTERFACE -Werror)
endif()
if(KCACHE_SANITIZE)
  target_compile_options(kcache_settings INTERFACE -fsanitize=${KCACHE_SANITIZE} -fno-omit-frame-pointer)
  target_link_options(kcache_settings INTERFACE -fsanitize=${KCACHE_SANITIZE})
  if(KCACHE_SANITIZE MATCHES "undefined")
    # UB ends the process (with a report) instead of printing and going on: a test fails on it.
    target_compile_options(kcache_settings INTERFACE -fno-sanitize-recover=all)
  endif()
  # Every executable carries the runtime options (halt on the first report, suppressions for
  # libraries we did not build) and, under TSan, what lets TSan see Debian's uninstrumented
  # Abseil synchronize (cmake/sanitizers/, docs/fuzzing.md).
  set(kcache_exe "$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>")
  target_sources(kcache_settings INTERFACE
    "$<${kcache_exe}:${PROJECT_SOURCE_DIR}/cmake/sanitizers/default_options.cc>")
  if(KCACHE_SANITIZE MATCHES "thread")
    target_sources(kcache_settings INTERFACE
      "$<${kcache_exe}:${PROJECT_SOURCE_DIR}/cmake/sanitizers/tsan_abseil.cc>")
    target_link_libraries(kcache_settings INTERFACE absl::synchronization absl::status
                                                    ${CMAKE_DL_LIBS})
  endif()
endif()
target_include_directories(kcache_settings INTERFACE ${PROJECT_SOURCE_DIR})

# KCACHE_FUZZ: tests/fuzz as libFuzzer targets (clang; the `fuzz` preset, docs/fuzzing.md).
# Everything is compiled with coverage for libFuzzer; only the fuzz targets link its driver.
option(KCACHE_FUZZ "Build tests/fuzz as libFuzzer targets (clang only)" OFF)
if(KCACHE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KCACHE_FUZZ needs clang (libFuzzer): configure with CC=clang "
                        "CXX=clang++, or use the fuzz preset")
  endif()
  target_compile_options(kcache_settings INTERFACE -fsanitize=fuzzer-no-link)
endif()
