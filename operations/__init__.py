"""What an operator runs beside the portal: backups of the whole state (database, stored
files and, on request, the secrets) in one verified archive, their restore into an empty
instance, and the portal's metrics for a monitoring system.

- `postgres`: the PostgreSQL client programs that fit the server the portal uses (the
  embedded one included) and the dump and restore of its database;
- `archive`: the archive's layout, manifest and checksums, written and checked as a stream;
- `backup`: a backup made while the portal runs, and its restore, verified;
- `actions`: the audited `do_*` writes (a backup made, one restored, old ones pruned)."""
