"""The one exception type the command line turns into exit status 2."""


class InputError(ValueError):
    """Bad input or usage: the message names the array, file or option and what is wrong."""
