"""One error type for a user's mistake: the CLI prints its message on one line and exits with code 2."""


class UserError(ValueError):
    """Bad input from the user (a file, a line, a field, a flag).

    The message must name what is wrong and where (file, line, field). The CLI catches it, prints the message
    without a traceback and exits with code 2.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None, field: str | None = None):
        where = ""
        if path is not None:
            where = str(path)
            if line is not None:
                where += f":{line}"
            where += ": "
        if field is not None and field not in message:
            message = f"{message} (field {field!r})"
        super().__init__(where + message)
        self.path = path
        self.line = line
        self.field = field


class Interrupted(Exception):
    """The user pressed Ctrl-C during a long job and what was done is kept: the CLI prints the message on one line
    (what to rerun, what was kept) and exits with code 130. Not a ``KeyboardInterrupt``, so that the command-line
    framework does not swallow its message."""
