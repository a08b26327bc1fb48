"""OpenLineage events as the lineage tests read them: from the provider's file transport, each
validated against the OpenLineage spec (the vendored JSON schemas in ``openlineage_spec/``)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SPEC = Path(__file__).resolve().parent / "openlineage_spec"


@cache
def spec_registry() -> Registry:
    resources = [Resource.from_contents(json.loads(p.read_text())) for p in SPEC.rglob("*.json")]
    return Registry().with_resources((r.contents["$id"], r) for r in resources)


def validate(event: dict[str, Any]) -> None:
    """The event against the spec's RunEvent, and each facet against its own schema. Every
    schema an event names must be vendored: an unknown one fails, naming it."""
    registry = spec_registry()

    def check(instance: dict[str, Any], url: str) -> None:
        base = url.partition("#")[0]
        assert base in set(registry), f"schema {base} is not vendored in {SPEC} (its README says how)"
        Draft202012Validator({"$ref": url}, registry=registry).validate(instance)

    check(event, event["schemaURL"])
    for facet in [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]:
        check(facet, facet["_schemaURL"])


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of the file, validated."""
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for event in events:
        validate(event)
    return events


def completes(path: Path, dag_id: str) -> dict[str, list[dict[str, Any]]]:
    """COMPLETE events of ``dag_id``'s tasks (validated), by task id, oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event in read_events(path):
        name = event["job"]["name"]
        if event["eventType"] == "COMPLETE" and name.startswith(f"{dag_id}."):
            found.setdefault(name[len(dag_id) + 1 :], []).append(event)
    return found
