"""A small CRD of our own (Widget), so these tests do not depend on deploy/crds."""

from __future__ import annotations

from typing import Any

GROUP, VERSION, PLURAL = "test.eipctl.io", "v1", "widgets"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Cluster",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Colour", "type": "string", "jsonPath": ".spec.colour"},
                    {"name": "First-Port", "type": "integer", "jsonPath": ".spec.ports[0].port"},
                    {"name": "Ports", "type": "string", "jsonPath": ".spec.ports[*].port"},
                    {
                        "name": "Pool",
                        "type": "string",
                        "jsonPath": ".metadata.labels.eipctl\\.io/pool",
                    },
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                    "colour": {
                                        "type": "string",
                                        "enum": ["red", "blue"],
                                        "default": "red",
                                    },
                                    "cidr": {
                                        "type": "string",
                                        "format": "cidr",
                                        "x-kubernetes-validations": [
                                            {
                                                "rule": "self == oldSelf",
                                                "message": "cidr is immutable",
                                            }
                                        ],
                                    },
                                    "name": {"type": "string", "pattern": "^[a-z]+$"},
                                    "port": {"x-kubernetes-int-or-string": True},
                                    "note": {"type": "string", "nullable": True},
                                    "ports": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {"port": {"type": "integer"}},
                                        },
                                    },
                                    "extra": {
                                        "type": "object",
                                        "additionalProperties": {"type": "string"},
                                    },
                                    "free": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"phase": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, size: int = 1, /, **spec: Any) -> dict[str, Any]:
    """A Widget body."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size, **spec},
    }
