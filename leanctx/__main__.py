"""`python -m leanctx` is the same as the `leanctx` command (and its help says `leanctx`)."""

from leanctx.cli import main

if __name__ == "__main__":
    main(prog_name="leanctx")
