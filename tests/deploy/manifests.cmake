# Checks of the manifests in deploy/ (label "deploy"; `ctest -L deploy`):
#   deploy.yamllint         yamllint --strict over deploy/ with deploy/.yamllint
#   deploy.manifests        deploy/tools/validate.py: renders deploy/k8s/base and every overlay
#                           with kustomize (`kubectl kustomize`), validates each object against
#                           the official Kubernetes schemas (kubernetes-validate, strict), and
#                           checks the kcached sidecar and deploy/systemd against the flags of the
#                           kcached built here (its --help), so a renamed flag fails this test
#   deploy.tools-selftest   tests/deploy/test_deploy_tools.py (pytest): the checks fail, with the
#                           right message, on each broken fixture in tests/deploy/testdata
# They need yamllint (Debian) and the project's Python environment (.venv, from
# requirements/test.txt): scripts/install-deps.sh installs both, and each test says so when one
# is missing. Where neither kubectl nor kustomize is installed, deploy.manifests is skipped (exit
# 125, after checking the systemd unit) and the self-test skips the tests that render. Tools are
# looked up when a test runs, not here, so installing them needs no new cmake run.
set(_deploy_src ${PROJECT_SOURCE_DIR})
set(_deploy_python ${PROJECT_SOURCE_DIR}/scripts/venv-python)

# (No semicolons in these shell lines: CMake would split the list there.)
add_test(NAME deploy.yamllint
         COMMAND sh -c "command -v yamllint >/dev/null || (echo 'yamllint not found: run scripts/install-deps.sh' >&2 && exit 1) && exec yamllint --strict -f parsable -c deploy/.yamllint deploy"
         WORKING_DIRECTORY ${_deploy_src})

set(_deploy_worker_args)
if(TARGET kcache_example_worker)
  set(_deploy_worker_args --worker $<TARGET_FILE:kcache_example_worker>)
endif()

add_test(NAME deploy.manifests
         COMMAND ${_deploy_python} deploy/tools/validate.py --kcached $<TARGET_FILE:kcached> ${_deploy_worker_args}
         WORKING_DIRECTORY ${_deploy_src})

add_test(NAME deploy.tools-selftest
         COMMAND ${_deploy_python} -m pytest -q -p no:cacheprovider tests/deploy --kcached $<TARGET_FILE:kcached>
         WORKING_DIRECTORY ${_deploy_src})

set_tests_properties(deploy.yamllint deploy.manifests deploy.tools-selftest PROPERTIES
                     LABELS deploy
                     TIMEOUT 300)
set_tests_properties(deploy.manifests PROPERTIES SKIP_RETURN_CODE 125)
