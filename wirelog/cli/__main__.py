"""`python -m wirelog.cli`."""

from wirelog.cli.start import main

main()
