"""Moved to the `pgarrays` package (below every app, so analytics' event writer can use
it too); kept only until the importers in the pipeline are moved over."""

from pgarrays import array_literal

__all__ = ["array_literal"]
