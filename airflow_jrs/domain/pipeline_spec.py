"""A Spark Declarative Pipelines spec, as the guard reads it: what the run computes, and the
spec an attempt runs (its ``storage`` moved under the attempt's fenced folder).

The ``spark-pipelines`` CLI (``pyspark/pipelines/cli.py``) reads a YAML spec: ``name``,
``storage`` (the root of checkpoints and pipeline metadata, a URI with a scheme), optional
``catalog``, ``database`` (or ``schema``), ``configuration`` (Spark conf) and ``libraries``
(globs, relative to the spec's folder, of the ``.py`` and ``.sql`` files that define the
datasets). These rules read it the same way, so the fingerprint covers exactly the definitions
the CLI loads.

Airflow-free and Spark-free: the operator, the launcher and ``airflow-jrs plan`` all call them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from airflow_jrs.exceptions import JrsConfigError

#: The spec's fields the CLI accepts (``cli.unpack_pipeline_spec``).
SPEC_FIELDS = ("name", "storage", "catalog", "database", "schema", "configuration", "libraries")


def load_spec(spec_path: str) -> dict[str, Any]:
    """The spec at ``spec_path`` as a dict; raises naming the file when it is missing or not a spec."""
    import yaml

    path = Path(spec_path)
    if not path.is_file():
        raise JrsConfigError(
            f"pipeline_spec {spec_path!r} does not exist on this worker (or is not a file). Give the path of "
            "the pipeline's spark-pipeline.yml as the worker sees it (e.g. beside the DAG file)."
        )
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise JrsConfigError(f"pipeline_spec {spec_path}: not valid YAML ({exc})") from None
    if not isinstance(spec, dict) or "name" not in spec:
        raise JrsConfigError(
            f"pipeline_spec {spec_path}: not a pipeline spec (a YAML mapping with at least 'name' and 'libraries')"
        )
    unknown = sorted(set(spec) - set(SPEC_FIELDS))
    if unknown:
        raise JrsConfigError(
            f"pipeline_spec {spec_path}: unknown field(s) {unknown}; spark-pipelines accepts {list(SPEC_FIELDS)}"
        )
    return spec


def library_globs(spec: dict[str, Any]) -> list[str]:
    """The spec's library globs as the CLI expands them (``folder/**`` means every file below)."""
    globs = []
    for entry in spec.get("libraries") or []:
        try:
            pattern = str(entry["glob"]["include"])
        except (KeyError, TypeError):
            raise JrsConfigError(
                f"pipeline spec library entry {entry!r} is not {{'glob': {{'include': ...}}}}"
            ) from None
        globs.append(pattern + "/*" if pattern.endswith("/**") else pattern)
    return globs


def library_files(spec_path: str, spec: dict[str, Any]) -> list[Path]:
    """The definition files the CLI would load (relative to the spec's folder, sorted)."""
    root = Path(spec_path).resolve().parent
    found: set[Path] = set()
    for pattern in library_globs(spec):
        for match in root.glob(pattern):
            if match.is_file() and "__pycache__" not in match.parts:
                found.add(match.relative_to(root))
    return sorted(found)


def pipeline_fingerprint(spec_path: str, job_version: str | None) -> str:
    """sha256 over what a pipeline run computes: the spec (without ``storage``: the guard moves it
    under each attempt's fence), every definition file its libraries match (path and content),
    and ``job_version``. Conf passed to the operator, helper modules outside the libraries and
    the data the pipeline reads are not seen: bump ``job_version`` when a change there must
    recompute."""
    spec = load_spec(spec_path)
    root = Path(spec_path).resolve().parent
    h = hashlib.sha256()
    h.update(b"jrs-fp-pipeline-v1\0")
    h.update(json.dumps({k: v for k, v in spec.items() if k != "storage"}, sort_keys=True, default=str).encode())
    for rel in library_files(spec_path, spec):
        h.update(b"\0" + str(rel).encode() + b"\0")
        h.update((root / rel).read_bytes())
    h.update(b"\0")
    h.update((job_version or "").encode())
    return h.hexdigest()


def storage_uri(folder: str) -> str:
    """``folder`` as the URI the CLI requires for ``storage`` (``file://`` for a local path)."""
    if "://" in folder:
        return folder
    return Path(folder).resolve().as_uri()


def fenced_spec(spec: dict[str, Any], storage: str) -> dict[str, Any]:
    """The spec an attempt runs: the same definitions, ``storage`` at ``storage``."""
    return {**spec, "storage": storage_uri(storage)}
