"""Reference pages rendered from the code at build time, so that they cannot drift from it.

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``; hooks need no plugin). A page
asks for generated text with an HTML comment on a line of its own::

    <!-- jrs-reference: cli -->                       the airflow-jrs CLI, from its argparse parser
    <!-- jrs-reference: config -->                    [jrs], from get_provider_info()["config"]
    <!-- jrs-reference: params MODULE.CLASS -->       a class's parameters, from its source
    <!-- jrs-reference: api -->                       the UI plugin's JSON routes, from its source
    <!-- jrs-reference: metrics -->                   the Airflow metrics, from their one table

and the hook replaces the comment before the page is rendered (one renderer a source, in
``scripts/jrs_reference/``: cli.py, config.py, params.py, api.py, metrics.py). Nothing generated is
written to ``docs/``; ``python scripts/mkdocs_hooks.py cli|config|api|metrics|params MODULE.CLASS``
prints a block.

Why each source is read the way it is:

* the CLI and ``[jrs]`` are *imported*: ``airflow_jrs.cli`` and ``get_provider_info`` do no I/O
  and import no Airflow at import time (a rule of the package), so the text is exactly what a
  user's ``--help`` and Airflow's config show; so are the metrics (``METRICS`` of
  ``airflow_jrs.observability.metrics``, which imports Airflow only when it sends one);
* operators, sensors, triggers and the plugin are *parsed* (``ast``), not imported: importing them
  imports Airflow, which reads (and may create) ``$AIRFLOW_HOME/airflow.cfg`` and takes seconds;
  a docs build must not touch a user's Airflow home. Their parameters come from the
  ``__init__`` signature (names, types, defaults) and the ``:param name:`` lines of the class
  docstring (meaning);
* the CLI's parser is found tolerantly: a builder function (``build_parser`` and friends) if the
  module has one, else the parser that the ``airflow-jrs`` entry point builds, caught at its
  ``parse_args`` call. A CLI reshaped into a package or with a builder keeps rendering.

Read as source (on GitHub, in an editor) such a page would look empty where the comment is; it
says so in a note between ``<!-- jrs-source-only -->`` and ``<!-- /jrs-source-only -->``, which
the hook removes from the built page (where the generated text stands instead).

What cannot be rendered is a warning, and ``mkdocs build --strict`` (run by ``./dev test``) fails
on warnings: a reference that silently went stale is worse than a failed build.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from typing import Any

# MkDocs puts this file's folder on sys.path while it loads the hook; run as a script, it is there too.
from jrs_reference.api import render_api
from jrs_reference.cli import render_cli
from jrs_reference.config import render_config
from jrs_reference.metrics import render_metrics
from jrs_reference.params import render_params
from jrs_reference.text import cell, log

MARKER = re.compile(r"^<!--\s*jrs-reference:\s*([\w-]+)(?:\s+([^>]*?))?\s*-->\s*$", re.MULTILINE)
#: A note for readers of the page's source only, e.g. "this table is generated when the site is built".
SOURCE_ONLY = re.compile(
    r"^<!--\s*jrs-source-only\s*-->\n.*?^<!--\s*/jrs-source-only\s*-->[ \t]*\n?", re.MULTILINE | re.DOTALL
)


RENDERERS: dict[str, Callable[[str], str]] = {
    "cli": render_cli,
    "config": render_config,
    "params": render_params,
    "api": render_api,
    "metrics": render_metrics,
}


def expand(markdown: str, where: str = "") -> str:
    """``markdown`` with every ``<!-- jrs-reference: ... -->`` line replaced by its block."""

    def one(match: re.Match[str]) -> str:
        kind, argument = match.group(1), match.group(2) or ""
        renderer = RENDERERS.get(kind)
        if renderer is None:
            log.warning("reference: %s: unknown block %r (known: %s)", where, kind, ", ".join(RENDERERS))
            return match.group(0)
        try:
            return renderer(argument)
        except Exception as exc:  # the page still builds; --strict fails the build on the warning
            log.warning("reference: %s: cannot render %s %s: %s: %s", where, kind, argument, type(exc).__name__, exc)
            return f"!!! warning\n    This reference could not be generated ({type(exc).__name__}: {cell(exc)})."

    return MARKER.sub(one, SOURCE_ONLY.sub("", markdown))


def on_page_markdown(markdown: str, page: Any = None, **_: Any) -> str:
    """MkDocs event: expand the reference blocks of one page."""
    where = getattr(getattr(page, "file", None), "src_uri", "") or "page"
    return expand(markdown, where)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    kind, *rest = sys.argv[1:] or ["cli"]
    print(expand(f"<!-- jrs-reference: {kind} {' '.join(rest)} -->".replace("  ", " "), "command line"))
