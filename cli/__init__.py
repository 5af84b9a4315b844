"""The `verity` command line."""
