# The libraries of kcache's stand-ins for CUDA libraries (client/nvrtc, client/cuda) and the
# tests' fake driver: each a plain C library with a CUDA library's exact name and soname, and
# each stand-in's cache half, a C++ library it loads beside itself.

# kcache_preloaded_library(<target> SONAME <soname> DIRECTORY <dir> SOURCES <file>...
#                          [VERSION_SCRIPT <map>] [INSTALL <destination>])
# A shared library built from plain C with none of kcache_settings' flags, needing only the C
# library (it loads into every process `kcache run` starts, where no sanitizer or C++ runtime may
# follow it), hidden symbols by default: exactly one file named <soname> (libcuda.so.1: no
# libcuda.so link that a -lcuda could pick up) with that soname, in <dir>; installed into
# <destination> when given (where `kcache run` finds it from bin/: engine/keys/
# observed_manifest.h, FindNvrtcStandIn, FindCudaStandIn).
function(kcache_preloaded_library target)
  cmake_parse_arguments(ARG "" "SONAME;DIRECTORY;VERSION_SCRIPT;INSTALL" "SOURCES" ${ARGN})
  string(REGEX MATCH "^lib([^.]+)(\\..+)$" matched "${ARG_SONAME}")
  add_library(${target} SHARED ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX lib
    OUTPUT_NAME ${CMAKE_MATCH_1}
    SUFFIX ${CMAKE_MATCH_2}
    NO_SONAME ON
    C_STANDARD 11
    C_EXTENSIONS ON
    C_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${ARG_DIRECTORY})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${target} PRIVATE -Wall -Wextra -O2)
  target_link_options(${target} PRIVATE -Wl,-soname,${ARG_SONAME} -Wl,--no-undefined)
  if(ARG_VERSION_SCRIPT)
    set_target_properties(${target} PROPERTIES LINK_DEPENDS ${ARG_VERSION_SCRIPT})
    target_link_options(${target} PRIVATE -Wl,--version-script=${ARG_VERSION_SCRIPT})
  endif()
  target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
  if(ARG_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION ${ARG_INSTALL} NAMELINK_SKIP)
    set_target_properties(${target} PROPERTIES KCACHE_INSTALL_DIR ${ARG_INSTALL})
  endif()
endfunction()

# kcache_stand_in_cache(<target> STAND_IN <stand-in target> OUTPUT_NAME <name> MAP <map>
#                       SOURCES <file>... LIBRARIES <library>...)
# A stand-in's cache half, lib<name>.so beside the stand-in, where it is looked for
# (client/stand_in/stand_in.h, KcacheOpenBeside), in the build and where the stand-in is
# installed: C++ and kcache's own libraries, exporting only
# what <map> says; the system's libraries (absl, protobuf) stay shared, as Debian's protobuf
# archive is not built for a shared object. Not in sanitizer builds: a sanitizer's runtime cannot
# follow it into the processes it loads into (the stand-in then forwards every call).
function(kcache_stand_in_cache target)
  cmake_parse_arguments(ARG "" "STAND_IN;OUTPUT_NAME;MAP" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT TARGET ${ARG_STAND_IN} OR KCACHE_SANITIZE)
    return()
  endif()
  add_library(${target} SHARED ${ARG_SOURCES})
  get_target_property(directory ${ARG_STAND_IN} LIBRARY_OUTPUT_DIRECTORY)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${ARG_OUTPUT_NAME}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${ARG_MAP}
    LIBRARY_OUTPUT_DIRECTORY ${directory})
  target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  target_link_options(${target} PRIVATE -Wl,--version-script=${ARG_MAP}
    -Wl,--no-undefined -Wl,--as-needed -Wl,-Bsymbolic)
  add_dependencies(${ARG_STAND_IN} ${target})
  get_target_property(installed ${ARG_STAND_IN} KCACHE_INSTALL_DIR)
  if(installed)
    install(TARGETS ${target} LIBRARY DESTINATION ${installed})
  endif()
endfunction()
