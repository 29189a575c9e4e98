"""Reproductions of the papers' tables and figures.

Each module or package that defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int`` becomes ``privhist experiment NAME``. An experiment writes CSV, PNG and a
markdown summary into its output directory and never reads the network.

A paper's experiment is a package ``experiments/<paper>/`` split by concern: ``settings`` (the
paper's parameters and the ``--quick`` ones), ``data``, the runner, ``claims`` (the paper's
statements set beside the run's numbers), ``plots`` and ``cli`` (flags and files), its
``__init__`` re-exporting the public names. The runner calls the library's own steps (sampling,
calibration, reporting probabilities); where a simulation step differs from a release path its
docstring says why. :mod:`._common` holds what every experiment shares.
"""
