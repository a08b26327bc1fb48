"""One table of settings, one resolve(): its precedence, its errors, and who uses it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.get_provider_info import get_provider_info
from airflow_jrs.settings import BY_NAME, SETTINGS, JrsSettings, field_names, resolve

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_jrs"


def test_the_dataclass_has_one_field_per_row_with_its_default() -> None:
    assert sorted(field_names()) == sorted(BY_NAME)
    defaults = JrsSettings()
    for setting in SETTINGS:
        assert getattr(defaults, setting.name) == setting.default, setting.name


def test_airflow_config_section_is_the_table() -> None:
    options = get_provider_info()["config"]["jrs"]["options"]
    assert list(options) == [s.name for s in SETTINGS]
    assert options["lease_ttl"]["default"] == "60.0" and options["clean_ttl"]["default"] is None
    assert options["retries"]["type"] == "integer" and options["delete_on_commit"]["default"] == "False"


def test_precedence_argument_over_extra_over_section_over_default() -> None:
    section = {"lease_ttl": "30", "history_limit": "5", "retries": "1"}
    extra = {"lease_ttl": 20, "history_limit": "7"}
    settings = resolve(arguments={"lease_ttl": 10.0}, extra=extra, section=section)
    assert (settings.lease_ttl, settings.history_limit, settings.retries) == (10.0, 7, 1)
    assert settings.read_timeout == BY_NAME["read_timeout"].default


def test_none_argument_counts_as_unset_and_home_fills_the_roots() -> None:
    settings = resolve(arguments={"namespace": None}, section={"namespace": "prod"}, home="/srv/airflow")
    assert settings.namespace == "prod"
    assert (settings.output_root, settings.spec_root) == ("/srv/airflow/jrs/output", "/srv/airflow/jrs/specs")
    assert resolve().output_root == ""


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"lease_tll": 5}, "unknown jrs settings \\['lease_tll'\\]"),
        ({"lease_ttl": "-1"}, "'lease_ttl' has invalid value '-1' \\(must be positive\\).*AIRFLOW__JRS__LEASE_TTL"),
        ({"retries": "-1"}, "'retries'.*must be at least 0"),
        ({"history_limit": 0}, "'history_limit'.*must be at least 1"),
        ({"on_store_unavailable": "guess"}, "use one of \\['fail', 'run'\\]"),
        ({"delete_on_commit": "maybe"}, "must be true or false"),
        ({"durability": "replicas:0"}, "'durability'.*replicas:N"),
        ({"namespace": "a b"}, "namespace 'a b' is invalid"),
    ],
)
def test_invalid_values_name_the_setting_and_where_to_fix_it(arguments: dict, message: str) -> None:
    with pytest.raises(JrsConfigError, match=message):
        resolve(arguments=arguments)


def test_where_a_bad_value_came_from_is_named() -> None:
    with pytest.raises(JrsConfigError, match="from the connection extra"):
        resolve(extra={"retries": "many"})
    with pytest.raises(JrsConfigError, match="from \\[jrs\\] retries"):
        resolve(section={"retries": "many"})


def test_empty_clean_ttl_keeps_results_and_durability_is_normalised() -> None:
    settings = resolve(section={"clean_ttl": "", "durability": " AOF "})
    assert settings.clean_ttl is None and settings.durability == "aof"


def _literal_defaults(tree: ast.AST) -> list[str]:
    """Keyword arguments named like a setting and given a number literal: a second default."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("socket_timeout", "socket_connect_timeout"):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, int | float):
                found.append(f"{node.arg}={node.value.value}")
    return found


def test_no_module_hard_codes_the_redis_timeouts() -> None:
    """Triggers once built their clients with socket_timeout=10 whatever [jrs] read_timeout said."""
    offenders = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := _literal_defaults(ast.parse(path.read_text())))
    }
    assert offenders == {}
