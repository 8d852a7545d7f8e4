"""Checks of kcache's deploy/ folder: renders the kustomizations with the real kustomize,
validates every object against the official Kubernetes schemas (kubernetes-validate), and
cross-checks the kcached sidecar and the systemd unit with the flags of the built binaries.

Modules: cliflags (a CLI11 program's --help, and args checked against it), kustomize (the
renderer: `kubectl kustomize`), schema (object validation), checks (the checks themselves).
The command-line entry points are deploy/tools/{validate,render,pod_args}.py.
"""
