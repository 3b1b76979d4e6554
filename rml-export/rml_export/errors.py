"""The one error type of the exporters: a framework op that cannot be lowered."""


class ExportError(Exception):
    """An export failed; the message names the framework, the op and, when known, where.

    Attributes mirror the message so tests and tools can inspect them: ``framework``
    (``"torch"``, ``"jax"``, ``"tf"``), ``op`` (the framework's own op name) and
    ``location`` (a source line such as ``model.py:42`` where the framework records one).
    """

    def __init__(self, framework: str, op: str, reason: str, location: str | None = None):
        self.framework = framework
        self.op = op
        self.reason = reason
        self.location = location
        where = f" (at {location})" if location else ""
        super().__init__(f"{framework}: cannot export op '{op}'{where}: {reason}")
