"""Validates rendered objects against the official Kubernetes OpenAPI schemas, as the
kubernetes-validate package ships them per Kubernetes version, in their strict form: an
unknown field is an error (as under the API server's strict field validation, which
`kubectl apply` uses), so a misspelt `readinesProbe` fails here. Every problem of an object
is reported, not only the first."""
from __future__ import annotations

import json
import re
from functools import lru_cache

import jsonschema
import kubernetes_validate
import referencing
from kubernetes_validate import utils as kv

# The oldest Kubernetes that deploy/k8s supports (native sidecars: 1.29, where they are on by
# default). Objects valid for it are valid for every newer version the schemas know.
DEFAULT_KUBERNETES_VERSION = "1.29"


def package_version() -> str:
    return kubernetes_validate.version.__version__


def _schema_version(wanted: str) -> str:
    """The newest schema version kubernetes-validate ships that is not newer than `wanted`."""
    def key(v: str):
        return tuple(int(x) for x in v.split(".")[:2])
    known = sorted(set(kv.all_versions()), key=key)
    fitting = [v for v in known if key(v) <= key(wanted)]
    if not fitting:
        raise ValueError(f"kubernetes-validate {package_version()} has no schemas for Kubernetes "
                         f"{wanted} (it has {known[0]} to {known[-1]})")
    return fitting[-1]


@lru_cache(maxsize=None)
def _validator(kind: str, api_version: str, version: str):
    """The validator of one kind, or None when the schemas do not know it."""
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv.schema_contents(f"{folder}/{kind.lower()}-{group}.json", version)
    except FileNotFoundError:
        return None
    definitions = kv.schema_contents(f"{folder}/_definitions.json", version)
    registry = referencing.Registry().with_resources([
        (schema.get("$id", ""), referencing.Resource.from_contents(schema)),
        (definitions["$id"], referencing.Resource.from_contents(definitions)),
    ])
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _closest(word: str, candidates) -> str | None:
    def distance(a: str, b: str) -> int:
        row = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            prev, row[0] = row[0], i
            for j, cb in enumerate(b, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
        return row[len(b)]
    best = None
    for c in candidates:
        n = distance(word.lower(), c.lower())
        if n <= max(2, len(c) // 4) and (best is None or n < best[1]):
            best = (c, n)
    return best[0] if best else None


def _pointer(path) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path) if path else "/"


def _messages(error: jsonschema.ValidationError) -> list[str]:
    """One error as "<json pointer>: <what>" lines, in the words of the API's field names."""
    at = _pointer(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = (error.schema.get("properties") or {}).keys()
        out = []
        for field in error.instance:
            if field in known:
                continue
            hint = _closest(field, known)
            where = _pointer([*error.absolute_path, field])
            out.append(f'{where}: unknown field "{field}"' + (f' (did you mean "{hint}"?)' if hint else ""))
        return out
    if error.validator == "required":
        missing = re.match(r"'([^']*)' is a required property", error.message)
        return [f"{at}: must have required property {missing.group(1) if missing else error.message}"]
    if error.validator == "type":
        want = error.validator_value
        want = " or ".join(w for w in want if w != "null") if isinstance(want, list) else want
        return [f"{at}: must be {want} (is {json.dumps(error.instance)})"]
    if error.validator == "enum":
        return [f"{at}: {json.dumps(error.instance)} is not one of {json.dumps(error.validator_value)}"]
    if error.context:  # oneOf/anyOf (IntOrString and the like): the branch that came closest
        return _messages(jsonschema.exceptions.best_match(error.context))
    return [f"{at}: {error.message}"]


def validate_object(obj, kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> list[str]:
    """The problems of one object, each "<json pointer>: <what>" (or a sentence for an object
    that is not a Kubernetes type at all); [] when it is valid."""
    if not isinstance(obj, dict):
        return [f"not an object: {json.dumps(obj)[:80]}"]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not (isinstance(api_version, str) and isinstance(kind, str)
            and re.fullmatch(r"([a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?", api_version)
            and re.fullmatch(r"[A-Z][A-Za-z0-9]*", kind)):
        return [f"apiVersion {json.dumps(api_version)} kind {json.dumps(kind)} is not a Kubernetes type name"]
    version = _schema_version(kubernetes_version)
    validator = _validator(kind, api_version, version)
    if validator is None:
        return [f"unknown kind: {kind} in {api_version} is not a Kubernetes API type "
                f"(Kubernetes {version} schemas)"]
    problems: list[str] = []
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        problems.extend(_messages(error))
    return problems
