"""Writing leanctx into host configs and taking it back out, without damaging what is there."""
