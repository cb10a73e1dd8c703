"""The one exception type the command line turns into exit status 2."""


class InputError(ValueError):
    """Bad input or usage: the message names the array, file or option and what is wrong."""


def rows_text(rows, limit: int = 5) -> str:
    """The rows an error names: ``3, 7, 9`` or ``3, 7, 9, 12, 15, ... (40 rows)`` past ``limit``."""
    rows = [int(r) for r in rows]
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (f", ... ({len(rows)} rows)" if len(rows) > limit else "")
