"""Reading a hostile scenario file costs little and ends in one ScenarioError at file:line (D-loader-8)."""

from __future__ import annotations

import pytest

from simulator.scenario import bounded_yaml
from simulator.scenario.errors import MAX_REPORTED_ERRORS, ScenarioError, ScenarioErrors, ScenarioSyntaxError
from simulator.scenario.loader import load_file, parse_scenario

WORLD = "name: w\nduration: 10m\nprocesses:\n  - id: h1\n    sessions: [{id: alice}, {id: bob}]\n"

# The 504-byte "billion laughs": nine levels of nine aliases, 9^9 values when expanded.
BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))


def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, file="h.yaml")
    return info.value


def test_an_alias_bomb_is_refused_at_the_line_whose_expansion_is_too_large():
    err = error_of(WORLD + BILLION_LAUGHS)
    assert isinstance(err, ScenarioSyntaxError)
    assert str(err).startswith("h.yaml:10: YAML aliases expand the file to more than 50000 values — ")


def test_aliases_that_expand_to_too_much_text_are_refused():
    levels = 'a: &a "' + "x" * 1000 + '"\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 11)}]\n" for i in range(4))
    assert "more than 10000000 characters of text" in str(error_of(WORLD + levels))


def test_a_small_reuse_of_an_alias_still_loads():
    text = WORLD + "steps:\n  - at: 1m\n    send: {from: alice, to: bob, body: &hi hello}\n" \
                   "  - at: 2m\n    send: {from: bob, to: alice, body: *hi}\n"
    assert parse_scenario(text).spec.steps[1].send.body == "hello"


@pytest.mark.parametrize("value", ["&r [*r]", "&r {again: *r}", "&r [[[*r]]]"])
def test_a_recursive_alias_is_refused(value):
    assert str(error_of(WORLD + f"story: {value}\n")) == (
        "h.yaml:6: the alias `*r` is inside the collection it names (a recursive alias) — "
        "write the value out: a scenario cannot hold a cycle")


@pytest.mark.parametrize("value", ["[" * 100_000 + "]" * 100_000, "{a: " * 5_000 + "1" + "}" * 5_000])
def test_deep_nesting_is_refused_without_a_recursion_error(value):
    err = error_of(WORLD + f"story: {value}\n")
    assert str(err).startswith("h.yaml:6: the YAML nests deeper than 50 levels — ")


def test_nesting_up_to_the_limit_is_read():
    depth = bounded_yaml.MAX_DEPTH - 2  # the root mapping and `story` take two levels
    err = error_of(WORLD + "story: " + "[" * depth + "]" * depth + "\n")
    assert "nests deeper" not in str(err) and "story" in str(err)  # a type error, not a depth one


@pytest.mark.parametrize("value,problem", [
    ("!!python/object/apply:os.system [echo]", "could not determine a constructor for the tag"),
    ("2024-13-45", "the YAML value `2024-13-45` cannot be read (month must be in 1..12)"),
    ("2024-01-01 25:00:00", "cannot be read (hour must be in 0..23)"),
    ("9" * 5000, "cannot be read (Exceeds the limit (4300 digits) for integer string conversion"),
    ("!!omap [a, b]", "expected a mapping of length 1"),
])
def test_a_value_pyyaml_cannot_build_is_refused_at_its_line(value, problem):
    err = str(error_of(WORLD + f"story: {value}\n"))
    assert err.startswith("h.yaml:6: ") and problem in err


def test_a_merge_key_of_a_scalar_and_an_unhashable_key_are_refused_at_their_line():
    assert str(error_of(WORLD + "<<: 1\n")).startswith("h.yaml:")
    assert "found unhashable key" in str(error_of(WORLD + "? [a, b]\n: c\n"))


def test_a_surrogate_escape_is_refused_it_is_no_character():
    err = error_of(WORLD + 'story: "a\\udc80b"\n')
    assert str(err).startswith("h.yaml:6: the text holds \\udc80, half of a surrogate pair, which is no character — ")


def test_a_control_character_gives_its_line():
    assert str(error_of(WORLD + "story: a\x00b\n")).startswith(
        "h.yaml:6: YAML syntax: the character U+0000 is not allowed")


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text(WORLD + "story: " + "x" * 2000 + "\n")
    monkeypatch.setenv(bounded_yaml.MAX_FILE_BYTES_ENV, "1000")
    with pytest.raises(ScenarioSyntaxError) as info:
        load_file(path, display="big.yaml")
    assert str(info.value).startswith(
        f"big.yaml:1: the file is {path.stat().st_size} bytes, over the limit of 1000 bytes — ")
    monkeypatch.setenv(bounded_yaml.MAX_FILE_BYTES_ENV, "10000")
    assert load_file(path).spec.name == "w"


def test_the_size_limit_defaults_to_one_megabyte(monkeypatch):
    monkeypatch.delenv(bounded_yaml.MAX_FILE_BYTES_ENV, raising=False)
    assert bounded_yaml.max_file_bytes() == 1_000_000
    monkeypatch.setenv(bounded_yaml.MAX_FILE_BYTES_ENV, "lots")
    assert bounded_yaml.max_file_bytes() == 1_000_000


def test_only_a_regular_file_is_read(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    import os
    os.mkfifo(fifo)  # opening it would block until a writer came
    with pytest.raises(ScenarioSyntaxError, match=r"^pipe\.yaml:1: not a regular file — "):
        load_file(fifo, display="pipe.yaml")


def test_a_utf8_bom_is_dropped(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + WORLD.encode())
    assert load_file(path).spec.name == "w"


def test_bytes_that_are_not_utf8_give_their_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(WORLD.encode() + "story: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ScenarioSyntaxError, match=r"^l\.yaml:6: not UTF-8 text \(byte 0xe9"):
        load_file(path, display="l.yaml")


def test_a_large_file_is_parsed_by_libyaml_with_the_same_result(monkeypatch):
    text = WORLD.replace("10m", "1h") + "steps:\n" + "".join(
        f"  - {{at: {i}s, send: {{from: alice, to: bob, body: 'message number {i}'}}}}\n" for i in range(1500))
    assert len(text) > bounded_yaml.PURE_PYTHON_MAX_CHARS
    fast = parse_scenario(text)
    monkeypatch.setattr(bounded_yaml, "PURE_PYTHON_MAX_CHARS", 10**9)
    slow = parse_scenario(text)
    assert fast.spec == slow.spec and fast.positions == slow.positions


def test_too_many_values_are_refused_even_without_aliases():
    err = error_of(WORLD + "story: [" + ",".join(["1"] * 50_001) + "]\n")
    assert str(err).startswith("h.yaml:6: the file holds more than 50000 values — ")


def test_thousands_of_mistakes_are_reported_by_the_first_ones():
    text = WORLD + "steps:\n" + "".join(f"  - {{at: 1s, bogus{i}: 1}}\n" for i in range(2000))
    with pytest.raises(ScenarioErrors) as info:
        parse_scenario(text, file="m.yaml")
    errors = info.value.errors
    assert len(errors) == MAX_REPORTED_ERRORS + 1
    assert errors[0].format().startswith("m.yaml:7: steps[0].bogus0: unknown key `bogus0`")
    assert errors[-1].format() == (f"m.yaml:{7 + MAX_REPORTED_ERRORS}: {2000 - MAX_REPORTED_ERRORS} more errors "
                                   "from here on, not shown — fix the ones above and check the file again")


def test_an_unforeseen_failure_is_still_one_error_for_the_file(monkeypatch):
    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr("simulator.scenario.loader.record_positions", broken)
    err = error_of(WORLD)
    assert str(err).startswith(
        "h.yaml:1: the loader cannot read this file (RecursionError: maximum recursion depth exceeded)")


def test_a_duration_too_long_for_a_float_is_a_value_error_not_an_overflow():
    err = error_of(WORLD.replace("10m", "9" * 400 + "d"))
    assert str(err).startswith(
        "h.yaml:2: duration: '9999999999999999999999999999999999999999' is far too long a duration")
