#!/usr/bin/env bash
# Builds pgvector 0.8 for a Debian host's own PostgreSQL (Debian 12 ships none), from Debian
# trixie's source package, and installs it. Idempotent: does nothing when the extension is
# already installed for that server. Usage: scripts/install-pgvector.sh [PG_MAJOR]
set -euo pipefail

pg_major="${1:-$(ls /usr/lib/postgresql | sort -n | tail -n 1)}"
pg_config="/usr/lib/postgresql/${pg_major}/bin/pg_config"
if [ -f "/usr/share/postgresql/${pg_major}/extension/vector.control" ]; then
    echo "pgvector already installed for PostgreSQL ${pg_major}"
    exit 0
fi

# A private apt state with only trixie's source list, so the host's sources stay untouched.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mirror="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
echo "deb-src [trusted=yes] ${mirror} trixie main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache")

# Build tools and the server headers (this may upgrade the server package: restart after).
if ! dpkg -s "postgresql-server-dev-${pg_major}" >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-server-dev-${pg_major}" make gcc
fi

apt-get "${apt_opts[@]}" update -qq
(cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only pgvector)
tarball="$(ls "$work"/src/pgvector_*.orig.tar.* | head -n 1)"
tar -xf "$tarball" -C "$work/src"
srcdir="$(find "$work/src" -maxdepth 1 -type d -name 'pgvector-*' | head -n 1)"
# OPTFLAGS="" avoids -march=native, so the build runs on any x86-64 CPU.
make -C "$srcdir" OPTFLAGS="" PG_CONFIG="$pg_config" >/dev/null
make -C "$srcdir" OPTFLAGS="" PG_CONFIG="$pg_config" install >/dev/null

# Restart the cluster in case the server package was upgraded with the headers.
if command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$pg_major" main restart || \
        pg_ctlcluster --skip-systemctl-redirect "$pg_major" main start
fi
echo "pgvector installed for PostgreSQL ${pg_major}"
