"""What keeps a Spark Declarative Pipelines run on its attempt's fence: the settings that would
move its datasets elsewhere (refused before anything runs), the conf folder that carries the
fence's warehouse to both JVMs the CLI starts, and the datasets a run left under the fence.

Apart from :mod:`.pipelines_launcher` because these are the fence's rules, checked by the operator
at parse and execute time and by the launcher before and after the run; the launcher owns the
process (start, follow, stop), not where the data may go.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_jrs.exceptions import JrsConfigError

#: The session catalog: the only one whose tables land in ``spark.sql.warehouse.dir``.
SESSION_CATALOG = "spark_catalog"
#: Conf that moves the pipeline's server off the fence's warehouse or off the CLI's local server.
_FENCE_KEYS = ("spark.sql.warehouse.dir", "spark.master", "spark.remote", "spark.api.mode")
#: Conf prefixes that name a catalog or a metastore (where tables live is then theirs to say):
#: ``spark.sql.catalog*`` (``spark.sql.catalogImplementation`` and ``spark.sql.catalog.<name>``),
#: ``spark.sql.defaultCatalog``, Hive's and its metastore's JDO settings, also as Hadoop conf
#: (``spark.hadoop.*``).
_CATALOG_PREFIXES = (
    "spark.sql.catalog",
    "spark.sql.defaultCatalog",
    "hive.",
    "javax.jdo.",
    "spark.hadoop.hive.",
    "spark.hadoop.javax.jdo.",
)


def unfenced_setting(key: str) -> str | None:
    """Why Spark conf ``key`` would let the pipeline write outside the attempt's fenced
    warehouse (``None``: it would not). Why refused rather than overridden: a catalog or
    metastore the user configured decides where tables live (an Iceberg catalog's warehouse,
    a metastore's database locations), shared by every attempt, so a zombie could overwrite
    the winner's datasets; the fence cannot be kept while honouring it."""
    if key in _FENCE_KEYS:
        return (
            "the guard puts the pipeline's warehouse under the attempt's fenced folder, on the CLI's own local server"
        )
    if key.startswith(_CATALOG_PREFIXES):
        return (
            "it names a catalog or a metastore, which decides where the datasets land (shared by every attempt, "
            "outside the fence); only the session catalog in the fenced warehouse is supported"
        )
    return None


def spark_defaults(conf_dir: str) -> dict[str, str]:
    """The settings of ``<conf_dir>/spark-defaults.conf`` (key, whitespace or ``=``, value)."""
    path = Path(conf_dir) / "spark-defaults.conf"
    found: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.replace("=", " ", 1).partition(" ")
                found[key.strip()] = value.strip()
    return found


def check_fenced(spec: Mapping[str, Any], conf: Mapping[str, Any], conf_dir: str | None, *, who: str) -> None:
    """Raise :class:`JrsConfigError` naming the first setting that would put datasets outside the
    fence: ``conf`` (the operator's), the spec's ``catalog`` and ``configuration``, and the
    worker's Spark configuration in ``conf_dir`` (``SPARK_CONF_DIR``: its ``hive-site.xml``,
    its ``spark-defaults.conf``), which every JVM of the run reads."""
    catalog = spec.get("catalog")
    if catalog not in (None, "", SESSION_CATALOG):
        raise JrsConfigError(
            f"{who}: the pipeline spec's catalog {catalog!r} is not supported: its tables land where that catalog "
            f"says, shared by every attempt (a zombie attempt could overwrite the winner's), not under the attempt's "
            f"fenced warehouse. Remove 'catalog' from the spec (or set it to {SESSION_CATALOG!r})."
        )
    sources = [("conf", conf), ("the pipeline spec's configuration", spec.get("configuration") or {})]
    if conf_dir:
        if (Path(conf_dir) / "hive-site.xml").exists():
            raise JrsConfigError(
                f"{who}: SPARK_CONF_DIR {conf_dir} has a hive-site.xml: a Hive metastore decides where the "
                "pipeline's tables land (its databases' locations, shared by every attempt), not the attempt's "
                "fenced warehouse. Give the task a SPARK_CONF_DIR without hive-site.xml (env_vars)."
            )
        sources.append((f"{conf_dir}/spark-defaults.conf", spark_defaults(conf_dir)))
    for where, settings in sources:
        if not isinstance(settings, Mapping):
            raise JrsConfigError(f"{who}: {where} must be a mapping of Spark settings, not {type(settings).__name__}")
        for key in settings:
            reason = unfenced_setting(str(key))
            if reason is not None:
                raise JrsConfigError(f"{who}: {key!r} in {where} may not be set: {reason}. Remove it.")


def datasets_under(warehouse: str) -> list[str]:
    """The datasets a run left in ``warehouse``: ``table`` for the default database, ``db.table``
    for ``<db>.db/<table>`` (Spark's session-catalog layout). Empty when there is none."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(warehouse)
    found: list[str] = []
    try:
        entries = fs.ls(root, detail=True)
    except FileNotFoundError:
        return []
    for entry in entries:
        if entry.get("type") != "directory":
            continue
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        if name.startswith((".", "_")):
            continue
        if name.endswith(".db"):
            for table in fs.ls(entry["name"], detail=True):
                if table.get("type") == "directory":
                    found.append(f"{name[:-3]}.{table['name'].rstrip('/').rsplit('/', 1)[-1]}")
        else:
            found.append(name)
    return sorted(found)


def spark_conf_dir(folder: str, base: str | None, conf: Mapping[str, str]) -> str:
    """A ``SPARK_CONF_DIR`` for one attempt: ``base``'s files (the worker's own Spark
    configuration, if any) with ``conf`` appended to ``spark-defaults.conf``.

    Why not ``--conf`` alone: the JVM ``spark-pipelines`` starts does not run the pipeline; the
    CLI's Python starts a second one (the local Connect server) from the conf ``SparkSubmit``
    hands it in ``PYSPARK_REMOTE_INIT_CONF_<i>`` chunks, and pyspark 4.3 keeps only the *last*
    chunk (``connect/session.py``, ``_start_connect_server``): with a dozen settings the
    warehouse was silently dropped and the datasets went to ``./spark-warehouse``, outside the
    fence. Every ``spark-submit`` (both JVMs) reads ``spark-defaults.conf`` first, so the
    fence's warehouse and the ``spark.jrs.*`` conf reach the server whatever pyspark does."""
    target = Path(folder) / "conf"
    if base and Path(base).is_dir():
        shutil.copytree(base, target)
    target.mkdir(parents=True, exist_ok=True)
    defaults = target / "spark-defaults.conf"
    existing = defaults.read_text(encoding="utf-8") if defaults.exists() else ""
    lines = [f"{key} {value}".replace("\\", "\\\\") for key, value in conf.items()]
    defaults.write_text(existing.rstrip("\n") + "\n# airflow-jrs: this attempt's fence\n" + "\n".join(lines) + "\n")
    return str(target)


#: The shim's Python: the CLI's Python gets ``PR_SET_PDEATHSIG`` before it becomes the CLI.
