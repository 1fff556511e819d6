"""The one error type the document commands turn into a message and a non-zero exit."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the command line: printed as ``error: <message>``, exit status 2."""
