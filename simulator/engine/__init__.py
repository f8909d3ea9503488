"""The parent process of a run: the agenda over virtual time, the forks, fault steps, observations."""
