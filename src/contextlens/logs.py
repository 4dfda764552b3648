"""Logging set-up for ``verbose=True``."""

from __future__ import annotations

import logging

LOGGER = logging.getLogger("contextlens")


def enable_verbose() -> None:
    """Show contextlens' INFO messages; adds a stderr handler only when none is configured."""
    LOGGER.setLevel(logging.INFO)
    if not LOGGER.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s", "%H:%M:%S"))
        LOGGER.addHandler(handler)
