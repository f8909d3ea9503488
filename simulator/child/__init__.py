"""Code that runs inside the forked processes: hygiene, the harness worker loop, crash points, the lock holder."""
