"""`python -m leanctx` is the same as the `leanctx` command (and its help says `leanctx`).

The command hosts spawn and wait for, `leanctx mcp [--profile P]` as init registers it, goes
straight to the MCP server: loading the CLI (click and friends) would cost more than the server's
whole start-up. Any other spelling of `mcp` (`--help`, a typo) goes through the CLI, which explains.
"""

import sys


def main() -> None:
    if sys.argv[1:2] == ["mcp"]:
        from leanctx.cache.mcpserver import profile_of, run

        profile = profile_of(sys.argv[1:])
        if profile is not None:
            sys.exit(run(profile=profile))
    from leanctx.cli import main as cli_main

    cli_main(prog_name="leanctx")


if __name__ == "__main__":
    main()
