"""The ``microbench`` command line; nothing in the library imports this package."""
