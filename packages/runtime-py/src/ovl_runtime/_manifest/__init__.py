"""The ``ovl.manifest/v1`` contract: its typed dataclasses, JSON Schema check, parser and cross-field checks, the
index maps and row shards it describes, and how a run fills its input buffers."""
