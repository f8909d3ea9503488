"""thatch_core: the Python reference implementation of thatch's cross-session chat.

The system under test. It knows nothing about the simulator: it reads wall
time only through :mod:`thatch_core.clock` (so a freezegun freezer controls
it), talks to a real SQLite file through :mod:`thatch_core.db`, and keeps the
shared directory and inbox in :class:`thatch_core.store.ChatStore`.
"""
