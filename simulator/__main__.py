"""`python -m simulator ...`: see simulator.cli."""

from simulator.cli import main

raise SystemExit(main())
