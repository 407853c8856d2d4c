"""The restore of a database dump that nobody vouches for.

An archive is as trusted as a database dump: whoever made it chose every SQL statement it
holds, and the manifest's checksums and migration list come from the same hand, so they say
nothing about where it came from (a signature does: archive.py). Restored as a superuser, a
dump can run programs on the database server (`COPY … TO PROGRAM` inside a function that a
CHECK constraint calls, say). Three layers stand in the way, each enough for what it guards:

1. The dump's table of contents (`pg_restore --list`) may hold only what a portal's database
   holds (`ALLOWED_KINDS`, `EXTENSIONS`), all of it owned by one role; otherwise the restore
   is refused before anything runs.
2. A TOC entry's kind is only a label and its SQL may be anything, so the SQL runs in a
   session that logged in as a role that is neither a superuser nor a member of the roles
   that run programs or read and write the server's files: what that role cannot do, the
   dump cannot either (a `SET ROLE` or `RESET SESSION AUTHORIZATION` in the dump leads
   nowhere). When the portal's user is a superuser, that is a one-time role made for the
   restore (`restore_login`); its objects are handed to the portal's user afterwards.
3. Before the transaction commits, the catalogs are read again (`FORBIDDEN`): no function,
   trigger, rule, policy, operator, language, foreign server or publication made by the dump,
   and no default, constraint or index that calls a function PUBLIC may not run, since the
   portal's user (a superuser in the embedded mode) would run it later."""

from __future__ import annotations

import datetime as dt
import re
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.db import DatabaseError, connection, transaction
from django.db.backends.utils import CursorWrapper
from psycopg import sql

from operations import postgres
from operations.postgres import PostgresError

# What a portal's dump holds: Django's tables with their sequences, keys, indexes and rows, the
# extensions of EXTENSIONS with their comments, and the schemas an operator keeps beside
# `public` in the same database. pg_dump's other kinds (functions, procedures, aggregates,
# languages, triggers, event triggers, rules, policies, views, operators, casts, foreign
# servers, publications, subscriptions, large objects…) are refused: a portal never makes
# them, and they are what runs code, during the restore or later.
ALLOWED_KINDS = frozenset(
    {
        "SCHEMA",
        "TABLE",
        "TABLE DATA",
        "SEQUENCE",
        "SEQUENCE OWNED BY",
        "SEQUENCE SET",
        "DEFAULT",
        "CONSTRAINT",
        "CHECK CONSTRAINT",
        "FK CONSTRAINT",
        "INDEX",
        "COMMENT",
        "ACL",  # pg_restore --no-privileges leaves them out
    }
)
# The extensions the portal's migrations create (portal/migrations/0001_initial.py). They are
# created by the portal's own user before the restore, never by the dump's SQL.
EXTENSIONS = frozenset({"vector"})
# pg_dump's kinds that start with another kind's name: read whole, so that "DEFAULT ACL" is not
# taken for a DEFAULT in a schema named ACL.
LONGER_KINDS = (
    "DEFAULT ACL",
    "TABLE ATTACH",
    "INDEX ATTACH",
    "SEQUENCE OWNED BY",
    "SEQUENCE SET",
    "TABLE DATA",
    "MATERIALIZED VIEW DATA",
    "STATISTICS DATA",
    "EVENT TRIGGER",
    "TEXT SEARCH CONFIGURATION",
    "TEXT SEARCH DICTIONARY",
    "TEXT SEARCH PARSER",
    "TEXT SEARCH TEMPLATE",
    "FOREIGN DATA WRAPPER",
    "FOREIGN TABLE",
    "OPERATOR CLASS",
    "OPERATOR FAMILY",
    "PUBLICATION TABLE",
    "PUBLICATION TABLES IN SCHEMA",
    "SUBSCRIPTION TABLE",
    "PROCEDURAL LANGUAGE",
    "LARGE OBJECT",
    "BLOB METADATA",
    "SHELL TYPE",
    "USER MAPPING",
    "ACCESS METHOD",
    "DATABASE PROPERTIES",
)
KINDS = sorted(ALLOWED_KINDS | {"EXTENSION", *LONGER_KINDS}, key=len, reverse=True)
ENTRY = re.compile(r"(\d+); \d+ \d+ (.+)")
# Members of these may run programs or read and write files on the database server.
SERVER_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files")
# How long the one-time role could log in, should a killed restore leave it behind.
LOGIN_VALID = dt.timedelta(hours=12)


class DumpRefusedError(PostgresError):
    """The dump holds what a portal's database never does; nothing of it was run, or what ran
    was rolled back."""


@dataclass(frozen=True)
class Entry:
    """One line of `pg_restore --list`: `id; tableoid oid KIND NAMESPACE TAG OWNER`."""

    line: str
    kind: str
    namespace: str
    tag: str
    owner: str

    @property
    def label(self) -> str:
        return " ".join(part for part in (self.kind, self.namespace, self.tag) if part and part != "-")

    @property
    def allowed(self) -> bool:
        if self.kind == "EXTENSION":
            return self.tag in EXTENSIONS
        return self.kind in ALLOWED_KINDS

    @property
    def runs(self) -> bool:
        """Whether the dump's SQL for it runs: the extensions (and their comments, which only
        an extension's owner may set) and `public` are made by the portal's user instead."""
        if self.kind == "EXTENSION" or (self.kind == "COMMENT" and self.tag.startswith("EXTENSION ")):
            return False
        return not (self.kind == "SCHEMA" and self.tag == "public")


def read_toc(listing: str) -> list[Entry]:
    """The entries of a `pg_restore --list` listing. Names may hold spaces, so the owner is
    the last word and the kind is matched against pg_dump's own names."""
    entries = []
    for line in listing.splitlines():
        if not line.strip() or line.startswith(";"):
            continue
        found = ENTRY.fullmatch(line)
        if found is None:
            raise DumpRefusedError(
                f"The dump's table of contents has a line pg_restore does not write: {line[:200]!r}."
            )
        rest = found.group(2)
        kind = next((kind for kind in KINDS if rest.startswith(kind + " ")), rest.split(" ", 1)[0])
        namespace, _, named = rest[len(kind) + 1 :].partition(" ")
        tag, _, owner = named.rpartition(" ")
        entries.append(Entry(line, kind, namespace, tag, owner))
    return entries


def check_toc(entries: list[Entry]) -> None:
    """Refuses a dump that holds a kind of object a portal never makes, or objects of several
    owners (a portal's database belongs to its user alone)."""
    refused = [entry.label for entry in entries if not entry.allowed]
    if refused:
        shown = "; ".join(refused[:6]) + (f" and {len(refused) - 6} more" if len(refused) > 6 else "")
        raise DumpRefusedError(
            f"The database dump holds what a portal's database never does ({shown}); nothing of it was run. "
            "A portal's backup holds tables, their rows, keys, indexes and sequences, and the vector extension."
        )
    owners = sorted({entry.owner for entry in entries if entry.owner and entry.runs})
    if len(owners) > 1:
        raise DumpRefusedError(
            f"The database dump's objects belong to {len(owners)} roles ({', '.join(owners)}); a portal's all belong "
            "to its database user. Nothing of it was run."
        )


def check_dump(path: Path, client: postgres.Client) -> list[Entry]:
    """The dump's entries, once they passed `check_toc`."""
    process = subprocess.run(
        [client.program("pg_restore"), "--list", str(path)], env=client.environ, capture_output=True, check=False
    )
    if process.returncode != 0:
        raise PostgresError(postgres.failed("pg_restore", process, process.stderr))
    entries = read_toc(process.stdout.decode(errors="replace"))
    check_toc(entries)
    return entries


def restore(path: Path) -> None:
    """Replaces everything in the database's `public` schema by the dump's, in one
    transaction (see the module's docstring for what it refuses)."""
    server = postgres.server_major()
    client = postgres.client_for(max(server, postgres.dump_major(path)))
    entries = check_dump(path, client)
    use_list = "".join(entry.line + "\n" for entry in entries if entry.runs)
    committed = f"portal restore committed {secrets.token_hex(8)}"
    with restore_login(entries) as login:
        try:
            postgres.restore(
                path,
                client=client,
                server=server,
                login=login,
                use_list=use_list,
                before=PREAMBLE.encode(),
                after=postscript(committed),
                committed=committed.encode(),
            )
        except DumpRefusedError:
            raise
        except PostgresError as exc:
            raise _explained(exc, login) from exc


def _explained(error: PostgresError, login: postgres.Login) -> PostgresError:
    message = str(error)
    if "psql:" in message and "The dump created" in message:
        return DumpRefusedError(message)
    if login.user and re.search(r"authentication failed|no pg_hba\.conf entry", message):
        return PostgresError(
            f"{message} (the restore logs in as a one-time role, {login.user}, with a password: let pg_hba.conf "
            "accept password logins from where the portal connects, or give the portal a database user that is not "
            "a superuser)"
        )
    return error


@contextmanager
def restore_login(entries: list[Entry]) -> Iterator[postgres.Login]:
    """The login the dump's SQL runs under. The portal's user, when it is no superuser and
    no member of SERVER_ROLES; when it is a superuser, a new role with none of that, which
    owns `public` during the restore and whose objects then go to the portal's user."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET search_path = pg_catalog")
            cursor.execute(
                "SELECT rolsuper, ARRAY(SELECT name FROM unnest(%s::text[]) AS name "
                "WHERE pg_has_role(current_user, name, 'MEMBER')) FROM pg_roles WHERE rolname = current_user",
                [list(SERVER_ROLES)],
            )
            superuser, server_roles = cursor.fetchone()
            if server_roles and not superuser:
                raise PostgresError(
                    f"The portal's database user is a member of {', '.join(server_roles)}, so a dump restored as it "
                    "could run programs or reach files on the database server. Restore with a superuser (a role of "
                    "its own then restores) or with a user that has none of these roles."
                )
            _prepare_public(cursor, entries)
            if superuser:
                with transaction.atomic():  # no role left behind half made
                    created = _create_role(cursor, entries)
            else:
                created = None
    except DatabaseError as exc:
        raise PostgresError(f"The database could not be prepared for the restore: {exc}") from exc
    if created is None:
        yield postgres.Login(None, None)
        return
    role, password, owner = created
    try:
        yield postgres.Login(role, password)
    finally:
        _drop_role(role, owner)


def _prepare_public(cursor: CursorWrapper, entries: list[Entry]) -> None:
    """`public` and the portal's extensions, made by the portal's user (extensions are not
    the dump's to make)."""
    cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'public'")
    if cursor.fetchone() is None:
        cursor.execute("CREATE SCHEMA public")
    for name in sorted({entry.tag for entry in entries if entry.kind == "EXTENSION"} & EXTENSIONS):
        statement = sql.SQL("CREATE EXTENSION IF NOT EXISTS {} WITH SCHEMA public").format(sql.Identifier(name))
        cursor.execute(_sql(statement))


def _create_role(cursor: CursorWrapper, entries: list[Entry]) -> tuple[str, str, str]:
    """A role that logs in with a one-time password (trust, md5 and SCRAM alike), may make
    schemas only when the dump has some, and owns `public` meanwhile. Returns its name, its
    password and `public`'s owner before."""
    role = f"portal_restore_{secrets.token_hex(6)}"
    password = secrets.token_urlsafe(32)
    # The server gets a SCRAM verifier, never the password itself: statements may be logged.
    verifier = connection.connection.pgconn.encrypt_password(password.encode(), role.encode()).decode()
    until = (dt.datetime.now(dt.UTC) + LOGIN_VALID).isoformat()
    create = sql.SQL(
        "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS "
        "CONNECTION LIMIT 1 PASSWORD {} VALID UNTIL {}"
    ).format(sql.Identifier(role), sql.Literal(verifier), sql.Literal(until))
    cursor.execute(_sql(create))
    cursor.execute("SELECT nspowner::regrole::text, current_database() FROM pg_namespace WHERE nspname = 'public'")
    owner, database = cursor.fetchone()
    if owner.startswith("portal_restore_"):  # left behind by a restore that was killed
        owner = "CURRENT_USER"
    rights = "CONNECT, CREATE" if any(entry.kind == "SCHEMA" and entry.runs for entry in entries) else "CONNECT"
    grant = sql.SQL("GRANT " + rights + " ON DATABASE {} TO {}").format(sql.Identifier(database), sql.Identifier(role))
    cursor.execute(_sql(grant))
    cursor.execute(_sql(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(role))))
    return role, password, owner


def _drop_role(role: str, owner: str) -> None:
    """`public` back to its owner, the role's objects to the portal's user, then the role
    dropped. Should the role own objects of FORBIDDEN kinds (a dump that committed on its
    own before the final check), all its objects are dropped instead, and the restore fails."""
    connection.close()  # the restore's psql ended; a new session, with its own settings
    with connection.cursor() as cursor:
        cursor.execute("SET search_path = pg_catalog")
        cursor.execute(_sql(sql.Composed([forbidden(sql.Literal(role)), sql.SQL(" LIMIT 20")])))
        found = [row[0] for row in cursor.fetchall()]
        new_owner = sql.SQL("CURRENT_USER") if owner == "CURRENT_USER" else sql.Identifier(owner)
        cursor.execute(_sql(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(new_owner)))
        if not found:
            cursor.execute(_sql(sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(sql.Identifier(role))))
        cursor.execute(_sql(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role))))
        cursor.execute(_sql(sql.SQL("DROP ROLE {}").format(sql.Identifier(role))))
    connection.close()
    if found:
        raise DumpRefusedError(
            f"The dump created what a portal's database never holds ({', '.join(found)}) and committed it on its own; "
            "all it created was dropped, and the database holds no portal now: restore another archive."
        )


def _sql(statement: sql.Composable) -> str:
    return statement.as_string(connection.connection)


# Objects of `{owner}` that a portal's dump never makes, each described; extensions' members
# are not the dump's. Every name is schema-qualified: the dump may have set the search path.
FORBIDDEN = """
SELECT 'function ' || p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p
 WHERE p.proowner = {owner}::pg_catalog.regrole AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
  WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e')
UNION ALL SELECT 'operator ' || o.oid::pg_catalog.regoperator FROM pg_catalog.pg_operator o
 WHERE o.oprowner = {owner}::pg_catalog.regrole AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
  WHERE d.classid = 'pg_catalog.pg_operator'::pg_catalog.regclass AND d.objid = o.oid AND d.deptype = 'e')
UNION ALL SELECT 'trigger ' || t.tgname || ' on ' || t.tgrelid::pg_catalog.regclass FROM pg_catalog.pg_trigger t
 JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
 WHERE c.relowner = {owner}::pg_catalog.regrole AND NOT t.tgisinternal
UNION ALL SELECT 'rule ' || r.rulename || ' on ' || r.ev_class::pg_catalog.regclass FROM pg_catalog.pg_rewrite r
 JOIN pg_catalog.pg_class c ON c.oid = r.ev_class WHERE c.relowner = {owner}::pg_catalog.regrole
UNION ALL SELECT 'policy ' || y.polname || ' on ' || y.polrelid::pg_catalog.regclass FROM pg_catalog.pg_policy y
 JOIN pg_catalog.pg_class c ON c.oid = y.polrelid WHERE c.relowner = {owner}::pg_catalog.regrole
UNION ALL SELECT 'language ' || l.lanname FROM pg_catalog.pg_language l
 WHERE l.lanowner = {owner}::pg_catalog.regrole
UNION ALL SELECT 'extension ' || e.extname FROM pg_catalog.pg_extension e
 WHERE e.extowner = {owner}::pg_catalog.regrole AND e.extname::text <> ALL ({extensions}::text[])
UNION ALL SELECT 'foreign data wrapper ' || w.fdwname FROM pg_catalog.pg_foreign_data_wrapper w
 WHERE w.fdwowner = {owner}::pg_catalog.regrole
UNION ALL SELECT 'server ' || s.srvname FROM pg_catalog.pg_foreign_server s
 WHERE s.srvowner = {owner}::pg_catalog.regrole
UNION ALL SELECT 'publication ' || b.pubname FROM pg_catalog.pg_publication b
 WHERE b.pubowner = {owner}::pg_catalog.regrole
UNION ALL SELECT DISTINCT 'a call of ' || f.oid::pg_catalog.regprocedure || ' in ' || x.place FROM (
  SELECT a.adbin::text AS tree, 'a default of ' || a.adrelid::pg_catalog.regclass AS place
   FROM pg_catalog.pg_attrdef a JOIN pg_catalog.pg_class c ON c.oid = a.adrelid
   WHERE c.relowner = {owner}::pg_catalog.regrole
  UNION ALL SELECT k.conbin::text, 'the constraint ' || k.conname FROM pg_catalog.pg_constraint k
   LEFT JOIN pg_catalog.pg_class c ON c.oid = k.conrelid LEFT JOIN pg_catalog.pg_type t ON t.oid = k.contypid
   WHERE k.conbin IS NOT NULL AND {owner}::pg_catalog.regrole IN (c.relowner, t.typowner)
  UNION ALL SELECT pg_catalog.concat_ws(' ', i.indexprs, i.indpred), 'the index ' || i.indexrelid::pg_catalog.regclass
   FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
   WHERE c.relowner = {owner}::pg_catalog.regrole AND (i.indexprs IS NOT NULL OR i.indpred IS NOT NULL)
 ) x CROSS JOIN LATERAL pg_catalog.regexp_matches(x.tree, ':(?:funcid|opfuncid) (\\d+)', 'g') AS m
 JOIN pg_catalog.pg_proc f ON f.oid = m[1]::pg_catalog.oid
 WHERE NOT pg_catalog.has_function_privilege('public', f.oid, 'EXECUTE')
"""


def forbidden(owner: sql.Composable) -> sql.Composed:
    """FORBIDDEN for `owner` (a role's name as a literal, or CURRENT_USER)."""
    return sql.SQL(FORBIDDEN).format(owner=owner, extensions=sql.Literal(sorted(EXTENSIONS)))


# Written into psql before the dump's SQL: the login proven unprivileged, then everything the
# portal's user or the dump made in `public` dropped, but the extensions' members.
PREAMBLE = """BEGIN;
SET client_min_messages = warning;
DO $portal$ BEGIN
  IF pg_catalog.current_setting('is_superuser') <> 'off' THEN
    RAISE EXCEPTION 'The restore must not run as a superuser';
  END IF;
END $portal$;
DO $portal$ DECLARE item record; BEGIN
  FOR item IN
    SELECT pg_catalog.format('DROP %s IF EXISTS public.%I CASCADE', CASE c.relkind WHEN 'v' THEN 'VIEW'
      WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'c' THEN 'TYPE'
      ELSE 'TABLE' END, c.relname) AS statement, c.relkind IN ('S', 'c') AS later
    FROM pg_catalog.pg_class c
    WHERE c.relnamespace = 'public'::pg_catalog.regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f', 'c')
      AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
        WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e')
    UNION ALL
    SELECT pg_catalog.format('DROP ROUTINE IF EXISTS public.%I(%s) CASCADE', p.proname,
      pg_catalog.pg_get_function_identity_arguments(p.oid)), true
    FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = 'public'::pg_catalog.regnamespace
      AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
        WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e')
    UNION ALL
    SELECT pg_catalog.format('DROP TYPE IF EXISTS public.%I CASCADE', t.typname), true
    FROM pg_catalog.pg_type t
    WHERE t.typnamespace = 'public'::pg_catalog.regnamespace AND t.typrelid = 0 AND t.typelem = 0
      AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
        WHERE d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND d.objid = t.oid AND d.deptype = 'e')
    ORDER BY later  -- tables first: their sequences and row types go with them
  LOOP
    EXECUTE item.statement;
  END LOOP;
END $portal$;
"""

# Written after the dump's SQL: the catalogs read again, then the one commit, and a word that
# the dump cannot print before it (postgres.restore).
POSTSCRIPT = """SET search_path = pg_catalog;
DO $portal$ DECLARE found text; BEGIN
  SELECT pg_catalog.string_agg(what, ', ') INTO found FROM ({forbidden} LIMIT 20) AS forbidden(what);
  IF found IS NOT NULL THEN
    RAISE EXCEPTION 'The dump created what a portal''s database never holds: %', found;
  END IF;
END $portal$;
COMMIT;
SELECT {committed};
"""


def postscript(committed: str) -> bytes:
    statement = sql.SQL(POSTSCRIPT).format(forbidden=forbidden(sql.SQL("CURRENT_USER")), committed=committed)
    return statement.as_string().encode()
