"""`python -m leanctx` is the same as the `leanctx` command."""

from leanctx.cli import main

if __name__ == "__main__":
    main()
