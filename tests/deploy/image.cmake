# Checks of the image (deploy/Dockerfile) that run without a Docker engine. Each installs the
# build (`cmake --install` into a temporary prefix), as the Dockerfile's build stage does, so
# they need the whole build (kcached, kcache, kcache-compile-worker, kcache-example-worker,
# libkcache.so) done first.
#
#   deploy.image-dockerfile     the Dockerfile's RUN steps call scripts/install-deps.sh,
#                               scripts/build.sh and scripts/install-runtime-deps.sh; warm stage,
#                               runtime stage and the Deployment's programs line up.
#   deploy.image-runtime-deps   every library the installed binaries link (ldd -> dpkg -S) and
#                               the dlopen'd NVRTC/nvJitLink come from a package of
#                               scripts/install-runtime-deps.sh.
#   deploy.image-install-prefix the installed kcache warms a store, the installed kcached serves
#                               it read-only with the compile worker next to it and compiles a
#                               miss with only the listed CUDA packages' files.
set(kcache_image_tests ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME deploy.image-dockerfile
  COMMAND ${kcache_image_tests}/image_dockerfile.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
add_test(NAME deploy.image-runtime-deps
  COMMAND ${kcache_image_tests}/image_runtime_deps.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
          ${KCACHE_CUDA_HOME})
add_test(NAME deploy.image-install-prefix
  COMMAND ${kcache_image_tests}/image_install_prefix.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
          ${KCACHE_CUDA_HOME})
set_tests_properties(deploy.image-dockerfile deploy.image-runtime-deps deploy.image-install-prefix
  PROPERTIES LABELS deploy TIMEOUT 300)
# A sanitizer build links libasan/libtsan, which no image carries: the image is built without.
if(KCACHE_SANITIZE)
  set_tests_properties(deploy.image-runtime-deps PROPERTIES DISABLED TRUE)
endif()
