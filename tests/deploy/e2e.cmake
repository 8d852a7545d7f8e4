# deploy.e2e: tests/deploy/e2e.sh — the Dockerfile's warm stage and the pod's two containers
# with the manifest's own flags, then a scrape of /metrics. The flags come from
# deploy/tools/pod_args.py (the project's Python, and kubectl to render): skipped (125) where
# neither kubectl nor kustomize is installed.
add_test(NAME deploy.e2e
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e.sh
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(deploy.e2e PROPERTIES
  LABELS deploy
  TIMEOUT 600
  SKIP_RETURN_CODE 125
  ENVIRONMENT "KCACHE_CLI=$<TARGET_FILE:kcache>;KCACHED=$<TARGET_FILE:kcached>;KCACHE_EXAMPLE_WORKER=$<TARGET_FILE:kcache_example_worker>")
