"""wirelog: forensics and conversion for log/event wire protocols."""

__version__ = "0.1.0"
