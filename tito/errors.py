"""The one exception tito raises for bad input: printed as a message, never a traceback."""


class TitoError(Exception):
    """A problem the user can fix; `message` says what happened and what to do."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
