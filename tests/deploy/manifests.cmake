# Checks of the manifests in deploy/ (label "deploy"; `ctest -L deploy`):
#   deploy.yamllint         yamllint --strict over deploy/ with deploy/.yamllint
#   deploy.manifests        deploy/tools/validate.mjs: renders deploy/k8s/base and every overlay,
#                           validates each object against the Kubernetes API types, and checks the
#                           kcached sidecar and deploy/systemd against the flags of the kcached
#                           built here (its --help), so a renamed flag fails this test
#   deploy.tools-selftest   tests/deploy/deploy_tools.test.mjs: the checks fail, with the right
#                           message, on each broken fixture in tests/deploy/testdata
# They need yamllint, node and deploy/tools/node_modules: scripts/install-deps.sh installs them,
# and each test says so when one is missing. Tools are looked up when a test runs, not here, so
# installing them needs no new cmake run.
set(_deploy_src ${PROJECT_SOURCE_DIR})
set(_deploy_missing "not found: run scripts/install-deps.sh")

# (No semicolons in these shell lines: CMake would split the list there.)
add_test(NAME deploy.yamllint
         COMMAND sh -c "command -v yamllint >/dev/null || (echo 'yamllint ${_deploy_missing}' >&2 && exit 1) && exec yamllint --strict -f parsable -c deploy/.yamllint deploy"
         WORKING_DIRECTORY ${_deploy_src})

# node, from PATH when the test runs.
set(_deploy_node sh -c "command -v node >/dev/null || (echo 'node ${_deploy_missing}' >&2 && exit 1) && exec node \"$@\"" node)

set(_deploy_worker_args)
if(TARGET kcache_example_worker)
  set(_deploy_worker_args --worker $<TARGET_FILE:kcache_example_worker>)
endif()

add_test(NAME deploy.manifests
         COMMAND ${_deploy_node} deploy/tools/validate.mjs --kcached $<TARGET_FILE:kcached> ${_deploy_worker_args}
         WORKING_DIRECTORY ${_deploy_src})

add_test(NAME deploy.tools-selftest
         COMMAND ${_deploy_node} tests/deploy/deploy_tools.test.mjs --kcached $<TARGET_FILE:kcached>
         WORKING_DIRECTORY ${_deploy_src})

set_tests_properties(deploy.yamllint deploy.manifests deploy.tools-selftest PROPERTIES
                     LABELS deploy
                     TIMEOUT 120)
