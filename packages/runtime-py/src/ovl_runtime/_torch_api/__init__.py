"""What the torch API's operators share: input checks and per-rank views, the registry of operators bound to a
group (compiled, loaded, reused), the plain collectives and transposes their backward passes use."""
