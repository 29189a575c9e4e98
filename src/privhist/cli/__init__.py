"""The ``privhist`` command."""
