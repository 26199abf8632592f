"""`python -m activeeval`: the command line."""

from activeeval.cli import main

main()
