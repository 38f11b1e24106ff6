"""The provider interface every model implements (see provider_model.ProviderModel for the shared part)."""

from __future__ import annotations

import importlib
import importlib.util
from abc import ABC, abstractmethod
from types import ModuleType
from typing import Any

from metaeval.errors import ProviderUnavailableError
from metaeval.models.types import ModelRequest, ModelResult


class Model(ABC):
    """A named model behind one provider. Thread-safe `complete` is required."""

    provider: str = ""
    # (name, options) that get_model made it from: how to make it again elsewhere (a Ray worker)
    spec: tuple[str, dict[str, Any]] | None = None

    def __init__(self, name: str):
        self.name = name  # full "provider/model" name

    @abstractmethod
    def complete(self, request: ModelRequest) -> ModelResult:
        """Return one completion for `request` (retries and cost included)."""

    def supports_native_tools(self) -> bool:
        """True when the provider takes tool specs natively; otherwise agents use JSON actions."""
        return True


def require_sdk(module: str, what: str, install_hint: str) -> None:
    """Check that an optional SDK is installed without importing it (ProviderUnavailableError)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ProviderUnavailableError(f"{what} is not installed; install it with {install_hint}")


def import_sdk(module: str, what: str, install_hint: str) -> ModuleType:
    """Import an optional provider SDK, or raise ProviderUnavailableError saying how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProviderUnavailableError(
            f"{what} is not installed; install it with {install_hint}"
        ) from exc
