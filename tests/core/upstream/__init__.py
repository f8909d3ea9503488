"""The cases of the real thatch's tests/chat.test.ts, ported to thatch_core (see README.md)."""
