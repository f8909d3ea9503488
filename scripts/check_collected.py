"""The gate's account of the scenario library: every YAML file under the given directories was run (it has a
test case in the junit report) or is excluded by its first line (`# thatch-sim: not a scenario — WHY`).

    python scripts/check_collected.py reports/junit.xml scenarios

Prints one line per file that is neither, with what to do, and exits 1; else a one-line count and exits 0.
The paths are compared as the plugin records them (`scenario_file`: relative to where pytest ran), so run it
from the same directory as the pytest command.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's simulator, run from anywhere

from simulator.pytest_plugin.collection import unaccounted, yaml_files  # noqa: E402
from simulator.scenario.loader import exclusion_reason  # noqa: E402


def run_files(junit: Path) -> set[str]:
    """The scenario files the junit report has a test case of (run, failed, errored or skipped)."""
    root = ET.parse(junit).getroot()
    return {p.get("value") for p in root.iter("property") if p.get("name") == "scenario_file"}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    junit, roots = Path(argv[0]), [Path(a) for a in argv[1:]]
    files = yaml_files(roots)
    problems = unaccounted(files, run_files(junit), shown=lambda p: p.as_posix())
    for line in problems:
        print(line)
    excluded = sum(1 for f in files if exclusion_reason(f) is not None)
    print(f"scenario files: {len(files)} under {', '.join(map(str, roots))}, {excluded} excluded, "
          f"{len(problems)} neither run nor excluded")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
