"""ConfigSource: the chat switches, re-read on every load."""

import json

import pytest

from thatch_core.config import ChatConfig, ConfigSource


def _write(path, data):
    path.write_text(data if isinstance(data, str) else json.dumps(data))


@pytest.mark.rules("R29", "R30")
def test_defaults_missing_file_and_keys(tmp_path):
    """R29, R30: a missing file or key means chat on and auto-registration on."""
    src = ConfigSource(tmp_path / "nope.json")
    assert src.load() == ChatConfig(enabled=True, auto_register=True)
    _write(tmp_path / "c.json", {"other": 1})
    assert ConfigSource(tmp_path / "c.json").load() == ChatConfig()
    _write(tmp_path / "c.json", {"chat": {"enabled": False}})
    assert ConfigSource(tmp_path / "c.json").load() == ChatConfig(enabled=False, auto_register=True)


@pytest.mark.rules("R29", "R30")
def test_reread_on_every_load(tmp_path):
    """R29, R30: load() goes back to the file each time (tools see toggles at once)."""
    path = tmp_path / "config.json"
    src = ConfigSource(path)
    _write(path, {"chat": {"enabled": True, "autoRegister": False}})
    assert src.load() == ChatConfig(enabled=True, auto_register=False)
    _write(path, {"chat": {"enabled": False, "autoRegister": True}})
    assert src.load() == ChatConfig(enabled=False, auto_register=True)


def test_malformed_json_is_defaults_plus_warning(tmp_path):
    """A broken file never raises: defaults plus one warning via the log callable."""
    path = tmp_path / "config.json"
    _write(path, "{not json")
    logged = []
    assert ConfigSource(path, log=logged.append).load() == ChatConfig()
    assert len(logged) == 1 and "malformed" in logged[0]


def test_wrong_typed_flag_falls_back_loudly(tmp_path):
    """A non-boolean switch is ignored with a warning, never half-applied."""
    path = tmp_path / "config.json"
    _write(path, {"chat": {"enabled": "no", "autoRegister": False}})
    logged = []
    assert ConfigSource(path, log=logged.append).load() == ChatConfig(enabled=True, auto_register=False)
    assert logged and "chat.enabled" in logged[0]
    _write(path, ["not", "an", "object"])
    assert ConfigSource(path, log=logged.append).load() == ChatConfig()
