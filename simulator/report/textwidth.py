"""How wide a text is drawn, estimated from the advance widths of DejaVu Sans.

The report has no script, so it cannot measure its text in the browser: the
drawing sizes the lanes from these estimates instead. The widths are DejaVu
Sans's (the font the page names first, and the one the CI image carries) in
2048ths of an em, rounded up; bold adds a fixed factor, and any character
not listed counts as a full em. Liberation Sans and Arial are narrower, so
the fallbacks only leave more room. `tests/sim/report/test_screenshot.py`
measures the rendered text in headless Chromium against the boxes these
widths gave.
"""

from __future__ import annotations

_UNITS = 2048
_ASCII = {
    " ": 651, "!": 821, '"': 942, "#": 1716, "$": 1303, "%": 1946, "&": 1597, "'": 563, "(": 799, ")": 799,
    "*": 1024, "+": 1716, ",": 651, "-": 739, ".": 651, "/": 690, ":": 690, ";": 690, "<": 1716, "=": 1716,
    ">": 1716, "?": 1087, "@": 2048, "[": 799, "\\": 690, "]": 799, "^": 1716, "_": 1024, "`": 1024,
    "{": 1303, "|": 690, "}": 1303, "~": 1716,
    **dict.fromkeys("0123456789", 1303),
    "A": 1401, "B": 1405, "C": 1430, "D": 1577, "E": 1294, "F": 1178, "G": 1587, "H": 1540, "I": 604,
    "J": 604, "K": 1343, "L": 1141, "M": 1767, "N": 1532, "O": 1612, "P": 1235, "Q": 1612, "R": 1423,
    "S": 1300, "T": 1251, "U": 1499, "V": 1401, "W": 2025, "X": 1403, "Y": 1251, "Z": 1403,
    "a": 1255, "b": 1300, "c": 1126, "d": 1300, "e": 1260, "f": 721, "g": 1300, "h": 1298, "i": 569,
    "j": 569, "k": 1186, "l": 569, "m": 1995, "n": 1298, "o": 1253, "p": 1300, "q": 1300, "r": 842,
    "s": 1067, "t": 803, "u": 1298, "v": 1212, "w": 1675, "x": 1212, "y": 1212, "z": 1075,
}
BOLD = 1.16      # DejaVu Sans Bold against Book: about 1.07-1.23 a glyph
MONO_EM = 0.61   # DejaVu Sans Mono: every glyph 1233/2048 em
SLACK = 1.04     # kerning and hinting differ by a few per cent between renderers


def text_width(text: str, px: float, bold: bool = False, mono: bool = False) -> float:
    """The drawn width of `text` in CSS px at font size `px` (an estimate that errs wide)."""
    if mono:
        return len(text) * px * MONO_EM * SLACK
    units = sum(_ASCII.get(ch, _UNITS) for ch in text)
    return units / _UNITS * px * (BOLD if bold else 1.0) * SLACK
