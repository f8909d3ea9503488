"""The chat slice of thatch's user config (`~/.config/thatch/config.json`).

Only two switches matter to chat: `chat.enabled` (the whole feature) and
`chat.autoRegister` (automatic joining). The tools re-read the file on every
call so a toggle applies at once; the poller reads it once at init (R29).
That split lives in the callers: `ConfigSource.load()` simply re-reads the
file every time it is asked.

A broken config file must never break chat or the host: a malformed file
reads as the defaults plus one warning through the injected log callable.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from thatch_core.policy import DEFAULT as DEFAULT_POLICY
from thatch_core.policy import Policy, policy_from_config

DEFAULT_CONFIG_PATH = Path("~/.config/thatch/config.json")


@dataclass(frozen=True)
class ChatConfig:
    """The effective chat settings; the defaults are what a missing file means."""

    enabled: bool = True
    auto_register: bool = True
    # `chat.policy`: the messaging policy options (thatch_core.policy); absent = thatch's design.
    policy: Policy = DEFAULT_POLICY


def _stderr_log(message: str) -> None:
    print(message, file=sys.stderr)


class ConfigSource:
    """Reads `{"chat": {"enabled": bool, "autoRegister": bool}}` from a JSON file.

    `path=None` means the user's real config file. Every `load()` goes back to
    the disk: there is no cache, because a cache is exactly what would make a
    `chat.enabled: false` toggle need a restart for the tools.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, log: Callable[[str], None] | None = None):
        self.path = Path(path) if path is not None else DEFAULT_CONFIG_PATH.expanduser()
        self._log = log or _stderr_log

    def load(self) -> ChatConfig:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ChatConfig()
        except OSError as err:
            self._log(f"[thatch] cannot read config {self.path}: {err}; using chat defaults")
            return ChatConfig()
        try:
            data = json.loads(text)
        except ValueError as err:
            self._log(f"[thatch] malformed config {self.path}: {err}; using chat defaults")
            return ChatConfig()
        chat = data.get("chat") if isinstance(data, dict) else None
        if not isinstance(chat, dict):
            # A missing (or non-object) chat key is "not configured", not an error.
            return ChatConfig()
        return ChatConfig(
            enabled=_flag(chat, "enabled", True, self._log),
            auto_register=_flag(chat, "autoRegister", True, self._log),
            policy=policy_from_config(chat.get("policy"), self._log),
        )


def _flag(chat: dict, key: str, default: bool, log: Callable[[str], None]) -> bool:
    """One boolean switch; a wrong-typed value falls back to the default, loudly."""
    value = chat.get(key, default)
    if isinstance(value, bool):
        return value
    log(f"[thatch] config chat.{key} should be true or false, got {value!r}; using {default}")
    return default


class StaticConfig:
    """A ConfigSource stand-in holding one fixed ChatConfig (for callers that
    already know the settings, e.g. a simulator process told them by a scenario)."""

    def __init__(self, config: ChatConfig | None = None):
        self.config = config or ChatConfig()

    def load(self) -> ChatConfig:
        return self.config
