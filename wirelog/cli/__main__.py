"""`python -m wirelog.cli`."""

from wirelog.cli.main import main

main()
