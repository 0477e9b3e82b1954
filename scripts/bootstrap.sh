#!/usr/bin/env bash
# Prepare everything Wayline needs on this machine, and be quick when nothing changed:
# a virtual environment at .venv with the pinned packages (re-installed only when
# pyproject.toml changes) and Debian's PostgreSQL binaries when they are missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

need_apt=()
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    # Keep Debian from creating and starting its own cluster on 5432.
    mkdir -p /etc/postgresql-common
    grep -qs '^create_main_cluster *= *false' /etc/postgresql-common/createcluster.conf \
        || echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf
    need_apt+=(postgresql)
fi
if [ "${WAYLINE_NEEDS_CHROMIUM:-0}" = 1 ] && [ ! -x /usr/bin/chromium ]; then
    need_apt+=(chromium)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "bootstrap: missing Debian packages: ${need_apt[*]} (run as root or install them)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

stamp=".venv/.wayline-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test,otel]" \
        2> >(grep -v "is ignored: it is neither" >&2)
    echo "$want" > "$stamp"
fi
