"""`python -m simulator.explore ...`: the explore subcommand on its own (see simulator.explore.cli)."""

from simulator.explore.cli import main

raise SystemExit(main())
