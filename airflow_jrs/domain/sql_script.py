"""A Spark SQL script as the SQL operator runs it: its statements, and where they may write.

Airflow-free on purpose (tests and the fingerprint read it without a task). ``spark.sql()``
runs one statement, so the script is split on ``;`` the way the ``spark-sql`` CLI splits it:
not inside quotes (``'``, ``"``, backticks, with backslash escapes) nor comments (``--`` to the
end of the line, ``/* ... */``). A piece that holds only comments and blanks is no statement.

Placeholders, replaced after Airflow's templating (single braces survive Jinja, as in
``JrsSparkSubmitOperator``'s ``application_args``) and only once the attempt's fence is known:
``{jrs_output}`` (the attempt's fenced folder), ``{jrs_output.NAME}`` (the path of the output
``NAME`` under it), ``{jrs_job_id}``, ``{jrs_fence}``. The fingerprint is taken before they are
filled, so every attempt of one script has the same fingerprint.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from airflow_jrs.exceptions import JrsConfigError

#: What the provider's hook runs as a file (``spark-sql -f``) rather than as SQL text.
SQL_FILE_SUFFIXES = (".sql", ".hql")
_PLACEHOLDER = re.compile(r"\{jrs_[A-Za-z0-9_.\-]*\}")


def script_text(sql: str) -> str:
    """The SQL to run: ``sql`` itself, or the content of the file it names.

    In a task Airflow has already replaced a ``.sql``/``.hql`` name by the file's templated
    content (``template_ext``; a name it cannot find fails the rendering). What still names a
    file here was not rendered (``execute`` called directly, as in tests): it is read as the
    provider's ``spark-sql -f`` would, without templating."""
    candidate = sql.strip()
    if candidate.endswith(SQL_FILE_SUFFIXES) and not any(ch.isspace() for ch in candidate):
        if not os.path.isfile(candidate):
            raise JrsConfigError(
                f"sql names the file {candidate!r}, which does not exist on this worker. Give the path of an "
                "existing .sql/.hql file (relative to the DAG folder or its template_searchpath, or absolute), "
                "or the SQL text itself."
            )
        return Path(candidate).read_text(encoding="utf-8")
    return sql


def split_statements(script: str) -> list[str]:
    """The script's statements, stripped, in order. Comments inside a statement are kept; those
    before its first word are not (they belong to the script's layout, like blank lines)."""
    statements: list[str] = []
    current: list[str] = []
    meaningful = False  # the piece holds something besides comments and blanks
    i, n = 0, len(script)
    while i < n:
        ch = script[i]
        if ch in "'\"`":
            end = _end_of_quote(script, i)
            current.append(script[i:end])
            meaningful, i = True, end
        elif script.startswith(("--", "/*"), i):
            if script.startswith("--", i):
                end = script.find("\n", i)
                end = n if end < 0 else end
            else:
                end = script.find("*/", i + 2)
                end = n if end < 0 else end + 2
            if meaningful:  # a comment before a statement's first word is no part of it
                current.append(script[i:end])
            i = end
        elif ch == ";":
            if meaningful:
                statements.append("".join(current).strip())
            current, meaningful = [], False
            i += 1
        else:
            current.append(ch)
            meaningful = meaningful or not ch.isspace()
            i += 1
    if meaningful:
        statements.append("".join(current).strip())
    return statements


def _end_of_quote(script: str, start: int) -> int:
    quote, i = script[start], start + 1
    while i < len(script):
        if script[i] == "\\" and quote != "`":
            i += 2
            continue
        if script[i] == quote:
            return i + 1
        i += 1
    return len(script)  # unterminated: Spark's parser reports it, naming the statement


def check_placeholders(statements: Sequence[str], outputs: Mapping[str, str]) -> None:
    """Refuse a ``{jrs_...}`` placeholder that would not be filled (a typo, an output not declared):
    before the lease is taken, rather than as a path Spark would create literally."""
    known = {"{jrs_output}", "{jrs_job_id}", "{jrs_fence}", *(f"{{jrs_output.{name}}}" for name in outputs)}
    unknown = sorted({p for statement in statements for p in _PLACEHOLDER.findall(statement)} - known)
    if unknown:
        raise JrsConfigError(
            f"sql uses {', '.join(unknown)}, which the operator does not fill in. Use {{jrs_output}}, "
            "{jrs_job_id}, {jrs_fence} or {jrs_output.NAME} for a NAME in outputs "
            f"(declared: {sorted(outputs) or 'none'})."
        )


def fill_placeholders(
    statements: Sequence[str], *, output: str, outputs: Mapping[str, str], job_id: str, fence: int
) -> list[str]:
    """The statements with the attempt's fenced folder, output paths, job id and fence filled in."""
    values = {"{jrs_output}": output, "{jrs_job_id}": job_id, "{jrs_fence}": str(int(fence))}
    values.update({f"{{jrs_output.{name}}}": path for name, path in outputs.items()})
    pattern = re.compile("|".join(re.escape(key) for key in sorted(values, key=len, reverse=True)))
    return [pattern.sub(lambda match: values[match.group(0)], statement) for statement in statements]
