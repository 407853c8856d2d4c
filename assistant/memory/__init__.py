"""Per-user long-term memory on mem0: what the portal remembers about each user, apart from
every other user (service.py is the only code that talks to mem0; backends.py is what mem0
is built from)."""
