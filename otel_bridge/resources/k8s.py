"""Kubernetes resource attributes from downward-API environment variables and the pod's files."""

from __future__ import annotations

import os

from lens_core import semconv

__all__ = ["NAMESPACE_FILE", "detect_k8s"]

NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
"""Where a pod with a mounted service account finds its namespace."""

# attribute, then the variables read for it in order of preference. None of these is set by
# Kubernetes itself except HOSTNAME (the pod name unless spec.hostname overrides it); the
# others are the names pod specs conventionally map from the downward API (fieldRef).
_VARIABLES = (
    (semconv.K8S_POD_NAME, ("POD_NAME", "K8S_POD_NAME", "HOSTNAME")),
    (semconv.K8S_NAMESPACE_NAME, ("POD_NAMESPACE", "K8S_NAMESPACE")),
    (semconv.K8S_POD_UID, ("POD_UID", "K8S_POD_UID")),
    (semconv.K8S_NODE_NAME, ("NODE_NAME", "K8S_NODE_NAME")),
    (semconv.K8S_CONTAINER_NAME, ("CONTAINER_NAME", "K8S_CONTAINER_NAME")),
    (semconv.K8S_JOB_NAME, ("JOB_NAME", "K8S_JOB_NAME")),
)


def _read_namespace(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(256).strip() or None
    except (OSError, ValueError):
        return None


def detect_k8s(environ=None, namespace_file=NAMESPACE_FILE) -> dict:
    """Kubernetes attributes; ``{}`` unless ``KUBERNETES_SERVICE_HOST`` is set (it is in every pod).

    Reads, first set wins: ``k8s.pod.name`` from ``POD_NAME``, ``K8S_POD_NAME``,
    ``HOSTNAME``; ``k8s.namespace.name`` from ``POD_NAMESPACE``, ``K8S_NAMESPACE``, then
    ``namespace_file``; ``k8s.pod.uid`` from ``POD_UID``, ``K8S_POD_UID``;
    ``k8s.node.name`` from ``NODE_NAME``, ``K8S_NODE_NAME``; ``k8s.container.name`` from
    ``CONTAINER_NAME``, ``K8S_CONTAINER_NAME``; ``k8s.job.name`` from ``JOB_NAME``,
    ``K8S_JOB_NAME``.
    """
    environ = os.environ if environ is None else environ
    if not environ.get("KUBERNETES_SERVICE_HOST"):
        return {}
    attrs = {}
    for key, names in _VARIABLES:
        for name in names:
            value = environ.get(name, "").strip()
            if value:
                attrs[key] = value
                break
    if semconv.K8S_NAMESPACE_NAME not in attrs:
        namespace = _read_namespace(namespace_file)
        if namespace:
            attrs[semconv.K8S_NAMESPACE_NAME] = namespace
    return attrs
