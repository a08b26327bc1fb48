"""The renderers of the reference blocks that ``scripts/mkdocs_hooks.py`` expands, one module a source."""
