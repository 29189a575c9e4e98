"""The test suite: a regular package, so that no installed top-level ``tests`` shadows it."""
