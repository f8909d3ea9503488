"""A recording stand-in for the opencode SDK client the runtime talks to.

It records every prompt and answers the session questions (title, parent,
listing) from dicts; the tests of thatch_core.runtime and of the policies'
opencode wiring share it. The database behind a runtime is always real.
"""


class FakeClient:
    """Records every prompt; answers session questions from dicts."""

    def __init__(self, titles=None, parents=None, sessions=None):
        self.prompts = []  # (session_id, parts, no_reply)
        self.titles = dict(titles or {})
        self.parents = dict(parents or {})
        self.sessions = list(sessions or [])
        self.fail_prompts = False
        self.on_title = None  # callback(session_id) run inside session_title

    def prompt_async(self, session_id, parts, *, no_reply=False):
        if self.fail_prompts:
            raise ConnectionError("server gone")
        self.prompts.append((session_id, parts, no_reply))

    def session_title(self, session_id):
        if self.on_title is not None:
            self.on_title(session_id)
        return self.titles.get(session_id)

    def session_parent(self, session_id):
        return self.parents.get(session_id)

    def list_sessions(self, directory):
        return list(self.sessions)

    def wakes(self, sid=None):
        """The wake prompts (synthetic parts that start a turn), of one session or all."""
        return [p[0]["text"] for s, p, nr in self.prompts
                if p[0]["synthetic"] and not nr and (sid is None or s == sid)]

    def echoes(self, sid=None):
        """The transcript echoes (visible parts posted without a reply), of one session or all."""
        return [p[0]["text"] for s, p, nr in self.prompts
                if not p[0]["synthetic"] and nr and (sid is None or s == sid)]
