"""A Git repository over HTTPS (or HTTP, or a path on this server under PORTAL_SOURCE_ROOTS),
read through the git CLI.

A bare copy is kept in `location.workdir` between runs: the first run fetches the branch's
newest commit into it, later runs fetch only what is new, so an unchanged repository costs
one round trip. The listing is `git ls-tree` of that commit (the blob id is both the change
signal and the content's own id, so a rename is known without fetching), and contents come
from one `git cat-file --batch` process, streamed to the destination.

Credentials never reach a URL, an argument list or a file: git asks for them through
GIT_ASKPASS, a tiny script that prints two environment variables of the git process.
Configuration of this machine's user (credential helpers, URL rewrites) is not read, and
only the http, https and (for a path under PORTAL_SOURCE_ROOTS, or a file:// URL of one)
file protocols are allowed, so a repository URL cannot make git run a command.

The server's name is resolved and checked once by common.outbound's Connector; curl is then
told that address (http.curloptResolve), so it never asks DNS itself, and follows no
redirect and no proxy."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from django.utils.translation import gettext as _

from common.outbound import Connector, OutboundError, host_and_port
from portal.redact import scrub
from sources.remotes.base import Credentials, Entry, FileError, Location, RemoteError, file_link

FETCH_TIMEOUT_S = 30 * 60  # a first fetch of a large repository; a stalled one ends sooner (LOW_SPEED)
LOCAL_TIMEOUT_S = 10 * 60  # ls-tree, rev-parse: no network
LOW_SPEED_BYTES, LOW_SPEED_TIME_S = 1000, 30  # curl gives up on a transfer this slow for this long
CONNECT_TIMEOUT_S = 10  # git has no connect timeout of its own (curl waits minutes): see _probe
PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}  # curl's, in either case
CHUNK = 1024 * 1024
REF = "refs/portal/source"  # where the fetched commit is kept in the bare copy
MODE_SUBMODULE, MODE_SYMLINK = "160000", "120000"

# GIT_ASKPASS is called with a prompt ("Username for 'https://…': " or "Password for …");
# it answers from the environment that only the git process and its children see.
ASKPASS_SCRIPT = """#!/bin/sh
case "$1" in
  [Uu]sername*) printf '%s\\n' "$PORTAL_GIT_USERNAME" ;;
  *) printf '%s\\n' "$PORTAL_GIT_PASSWORD" ;;
esac
"""


class GitRemote:
    def __init__(self, location: Location, credentials: Credentials) -> None:
        self.location = location
        self.credentials = credentials
        self.prefix = location.prefix.strip("/")
        self._temporary: Path | None = None  # workdir and askpass script when none is kept
        self._askpass_dir: Path | None = None
        self._commit = ""
        self._default_branch = ""
        self._batch: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._connector = Connector()
        self._fetch_url, self._protocols = self._check_url(location.url)
        self._pinned: tuple[str, list[str]] | None = None  # the URL given to git, and its -c options

    # -- what the sync calls -----------------------------------------------------------------

    def entries(self) -> Iterator[Entry]:
        commit = self._update()
        treeish = f"{commit}:{self.prefix}" if self.prefix else commit
        if self.prefix and self._run("cat-file", "-t", treeish, check=False).stdout.strip() != b"tree":
            raise RemoteError(
                _("The folder “%(folder)s” is not in the repository's branch “%(branch)s”.")
                % {"folder": self.prefix, "branch": self.branch_name()}
            )
        listing = self._run("ls-tree", "-r", "-z", "--long", treeish, check=False)
        if listing.returncode != 0:
            raise RemoteError(
                _("Git could not list the repository: %(error)s") % {"error": self._last_line(listing.stderr)}
            )
        for record in listing.stdout.split(b"\0"):
            if record:
                yield self._entry(record)

    def fetch(self, entry: Entry, destination: Path) -> None:
        if entry.problem:
            raise FileError(entry.problem)
        oid = entry.content_id or entry.signal
        with self._lock, destination.open("wb") as out:
            self._copy_blob(oid, out)

    def link(self, path: str) -> str:
        template = self.location.link_template
        if not template:
            return ""
        branch = self.branch_name() if "{branch}" in template else self.location.branch
        return file_link(self.location, path, branch)

    def close(self) -> None:
        with self._lock:
            if self._batch is not None:
                if self._batch.stdin:
                    self._batch.stdin.close()
                try:
                    self._batch.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._batch.kill()
                    self._batch.wait()
                if self._batch.stdout:
                    self._batch.stdout.close()
                self._batch = None
        for folder in (self._askpass_dir, self._temporary):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self._askpass_dir = self._temporary = None

    def branch_name(self) -> str:
        """The configured branch, or the repository's default one (asked once, only when a
        link template needs it)."""
        if self.location.branch:
            return self.location.branch
        if not self._default_branch:
            result = self._run("ls-remote", "--symref", "--", self._git_url(), "HEAD", network=True, check=False)
            found = re.search(rb"^ref: refs/heads/(\S+)\tHEAD$", result.stdout, re.M)
            self._default_branch = found[1].decode() if found else "HEAD"
        return self._default_branch

    # -- the URL -----------------------------------------------------------------------------

    def _check_url(self, url: str) -> tuple[str, str]:
        """The URL to hand to git and the protocols it may use. A path on this server only
        under PORTAL_SOURCE_ROOTS; a password in the URL is refused (it would show in the
        process list and in messages: it belongs in the credentials)."""
        url = url.strip()
        scheme = urlsplit(url).scheme.lower()
        if scheme in ("http", "https"):
            parts = urlsplit(url)
            if parts.password:
                raise RemoteError(
                    _("Put the password or token in the source's credentials, not in the repository's address.")
                )
            return url, "http:https"
        if url.startswith("/") or scheme == "file":
            from sources.remotes.folder import check_local_path

            return str(check_local_path(url)), "file"
        raise RemoteError(
            _("“%(url)s” is not a Git address that can be synced: use https://, http:// or a folder on the server.")
            % {"url": scrub(url, *self.credentials.secrets())}
        )

    # -- the bare copy -----------------------------------------------------------------------

    @property
    def gitdir(self) -> Path:
        if self.location.workdir is not None:
            return Path(self.location.workdir)
        if self._temporary is None:
            self._temporary = Path(tempfile.mkdtemp(prefix="portal-git-"))
        return self._temporary / "repo.git"

    def _update(self) -> str:
        """Fetch the branch into the bare copy (creating it, or recreating a damaged one) and
        return the commit to list."""
        if self._commit:
            return self._commit
        branch = self.location.branch
        if branch and self._run("check-ref-format", f"refs/heads/{branch}", bare=False, check=False).returncode:
            raise RemoteError(_("“%(branch)s” is not a valid branch name.") % {"branch": branch})
        refspec = f"+refs/heads/{branch}:{REF}" if branch else f"+HEAD:{REF}"
        self._probe()
        for attempt in (1, 2):
            self._prepare_gitdir(fresh=attempt == 2)
            result = self._fetch(refspec)
            if result.returncode == 0:
                commit = self._run("rev-parse", "--verify", "-q", f"{REF}^{{commit}}", check=False)
                if commit.returncode == 0:
                    self._commit = commit.stdout.decode().strip()
                    return self._commit
                continue  # fetched, yet the commit is not there: the copy is damaged
            error = self._remote_error(result.stderr)
            if error is not None:
                raise error
        raise RemoteError(
            _("Git could not fetch %(url)s: %(error)s")
            % {"url": self._shown_url(), "error": self._last_line(result.stderr)}
        )

    def _git_url(self) -> str:
        return self._network_config()[0]

    def _network_config(self) -> tuple[str, list[str]]:
        """The URL git fetches from (its host written as checked) and the `-c` options that
        hold git and curl to the checked address (none for a repository on this server)."""
        if self._pinned is None:
            if self._protocols == "file":
                self._pinned = (self._fetch_url, [])
            else:
                try:
                    self._pinned = self._connector.git_url_and_config(self._fetch_url)
                except OutboundError as exc:
                    raise RemoteError(str(exc)) from None
        return self._pinned

    def _probe(self) -> None:
        """Connect to the server once, with a short timeout, before git does: git cannot be
        given a connect timeout, and an address that swallows packets would hold the run for
        minutes. The connection goes to the address git will be told to use."""
        if self._protocols == "file":
            return
        self._network_config()  # refused here, before anything connects
        host, port = host_and_port(self._fetch_url)
        try:
            self._connector.connect(host, port, timeout=CONNECT_TIMEOUT_S).close()
        except OutboundError as exc:
            raise RemoteError(str(exc)) from None
        except TimeoutError:
            raise RemoteError(_("Could not reach %(host)s: the connection timed out.") % {"host": host}) from None
        except ConnectionRefusedError:
            raise RemoteError(_("Could not reach %(host)s: connection refused.") % {"host": host}) from None
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise RemoteError(_("Could not reach %(host)s: %(reason)s.") % {"host": host, "reason": reason}) from None

    def _fetch(self, refspec: str) -> subprocess.CompletedProcess[bytes]:
        # Only the newest commit is needed: a shallow fetch spares the history. A "dumb" HTTP
        # server (plain files) cannot do shallow fetches, so those fetch everything.
        args = ["fetch", "--no-tags", "--no-write-fetch-head", "--quiet", "--depth=1", "--", self._git_url(), refspec]
        result = self._run(*args, network=True, check=False)
        if result.returncode and b"does not support shallow" in result.stderr:
            args.remove("--depth=1")
            result = self._run(*args, network=True, check=False)
        return result

    def _prepare_gitdir(self, fresh: bool) -> None:
        gitdir = self.gitdir
        if gitdir.exists() and not fresh:
            check = self._run("rev-parse", "--is-bare-repository", check=False)
            if check.returncode == 0 and check.stdout.strip() == b"true":
                return
        if gitdir.is_dir() and not gitdir.is_symlink():
            shutil.rmtree(gitdir)
        elif gitdir.exists() or gitdir.is_symlink():
            gitdir.unlink()
        gitdir.parent.mkdir(parents=True, exist_ok=True)
        self._run("init", "--quiet", "--bare", str(gitdir), bare=False)

    # -- blobs -------------------------------------------------------------------------------

    def _copy_blob(self, oid: str, out: IO[bytes]) -> None:
        if not re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", oid):
            raise FileError(_("the listing gave no Git object for this file"))
        batch = self._batch_process()
        assert batch.stdin is not None
        assert batch.stdout is not None
        try:
            batch.stdin.write(oid.encode() + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
        except OSError:
            self._batch = None
            raise RemoteError(_("Git stopped while reading the repository.")) from None
        if len(header) != 3 or header[1] != b"blob":
            if len(header) == 2 and header[1] == b"missing":
                raise FileError(_("its content is no longer in the copy of the repository; the next sync reads it"))
            self._batch = None
            raise RemoteError(_("Git stopped while reading the repository."))
        remaining = int(header[2])
        while remaining:
            chunk = batch.stdout.read(min(CHUNK, remaining))
            if not chunk:
                self._batch = None
                raise RemoteError(_("Git stopped while reading the repository."))
            out.write(chunk)
            remaining -= len(chunk)
        batch.stdout.read(1)  # the newline after each object

    def _batch_process(self) -> subprocess.Popen[bytes]:
        if self._batch is None or self._batch.poll() is not None:
            self._batch = subprocess.Popen(
                self._command("cat-file", "--batch"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self._env(network=False),
            )
        return self._batch

    # -- running git -------------------------------------------------------------------------

    def _command(self, *args: str, bare: bool = True, network: bool = False) -> list[str]:
        config = [
            "-c",
            "credential.helper=",
            "-c",
            f"http.lowSpeedLimit={LOW_SPEED_BYTES}",
            "-c",
            f"http.lowSpeedTime={LOW_SPEED_TIME_S}",
            "-c",
            "core.quotePath=false",
        ]
        if network:
            config += self._network_config()[1]
        where = [f"--git-dir={self.gitdir}"] if bare else []
        return ["git", *config, *where, *args]

    def _env(self, network: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k.lower() not in PROXY_VARIABLES}
        env.update(
            LC_ALL="C",
            GIT_TERMINAL_PROMPT="0",
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_ALLOW_PROTOCOL=self._protocols,
        )
        if network:
            env.update(
                GIT_ASKPASS=str(self._askpass()),
                PORTAL_GIT_USERNAME=self.credentials.username,
                PORTAL_GIT_PASSWORD=self.credentials.password,
            )
        return env

    def _askpass(self) -> Path:
        if self._askpass_dir is None:
            self._askpass_dir = Path(tempfile.mkdtemp(prefix="portal-askpass-"))
        script = self._askpass_dir / "askpass.sh"
        if not script.exists():
            script.write_text(ASKPASS_SCRIPT)
            script.chmod(0o700)
        return script

    def _run(
        self, *args: str, network: bool = False, bare: bool = True, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            result = subprocess.run(
                self._command(*args, bare=bare, network=network),
                capture_output=True,
                env=self._env(network),
                timeout=FETCH_TIMEOUT_S if network else LOCAL_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            minutes = (FETCH_TIMEOUT_S if network else LOCAL_TIMEOUT_S) // 60
            raise RemoteError(_("Git did not finish within %(minutes)d minutes.") % {"minutes": minutes}) from None
        except OSError as exc:
            raise RemoteError(_("Git could not be started: %(error)s") % {"error": exc.strerror or exc}) from None
        if check and result.returncode:
            raise RemoteError(_("Git failed: %(error)s") % {"error": self._last_line(result.stderr)})
        return result

    # -- messages ----------------------------------------------------------------------------

    def _shown_url(self) -> str:
        return scrub(self.location.url, *self.credentials.secrets())

    def _host(self) -> str:
        return urlsplit(self._fetch_url).hostname or self._fetch_url

    def _last_line(self, stderr: bytes) -> str:
        lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
        text = lines[-1] if lines else _("no message")
        text = text.removeprefix("fatal: ").removeprefix("error: ")
        return scrub(text, *self.credentials.secrets())

    def _remote_error(self, stderr: bytes) -> RemoteError | None:
        """What went wrong on the remote's side, in words; None when the cause may be the
        local copy (the caller then starts it over once)."""
        text = stderr.decode(errors="replace")
        lowered = text.lower()
        host = self._host()
        if re.search(r"returned error: 30[0-8]\b", lowered):
            return RemoteError(
                _(
                    "The Git server at %(host)s answered with a redirect, which is not followed: give the source "
                    "the address it redirects to."
                )
                % {"host": host}
            )
        if "couldn't find remote ref" in lowered:
            return RemoteError(
                _("The branch “%(branch)s” does not exist in the repository.") % {"branch": self.location.branch}
            )
        if re.search(r"authentication failed|could not read (username|password)|\b40[13]\b", lowered):
            if not self.credentials.username and not self.credentials.password:
                return RemoteError(_("The Git server asks for a user name and a password or token."))
            return RemoteError(_("The Git server refused the user name or password."))
        if "could not resolve host" in lowered:
            return RemoteError(_("Could not reach %(host)s: the name does not resolve.") % {"host": host})
        if "connection refused" in lowered or "failed to connect" in lowered:
            return RemoteError(_("Could not reach %(host)s: connection refused.") % {"host": host})
        if "timed out" in lowered or "too slow" in lowered:
            return RemoteError(_("Could not reach %(host)s: the connection timed out.") % {"host": host})
        if "ssl" in lowered or "certificate" in lowered:
            return RemoteError(
                _("The connection to %(host)s is not secure: %(error)s")
                % {"host": host, "error": self._last_line(stderr)}
            )
        if re.search(
            r"not found|does not appear to be a git repository|not a git repository|not exported|\b404\b", lowered
        ):
            return RemoteError(_("There is no Git repository at %(url)s.") % {"url": self._shown_url()})
        return None

    # -- the listing -------------------------------------------------------------------------

    def _entry(self, record: bytes) -> Entry:
        header, _tab, raw_path = record.partition(b"\t")
        mode, _kind, oid, size = header.decode().split()
        path = raw_path.decode("utf-8", errors="replace")
        if mode == MODE_SUBMODULE:
            return Entry(path, oid, problem=_("a Git submodule: its files are not synced"))
        if mode == MODE_SYMLINK:
            return Entry(path, oid, content_id=oid, problem=_("a symbolic link in Git: links are not followed"))
        return Entry(path, oid, size=int(size) if size.isdigit() else None, content_id=oid)
