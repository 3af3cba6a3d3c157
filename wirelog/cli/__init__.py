"""The click command line; the only layer that prints."""
