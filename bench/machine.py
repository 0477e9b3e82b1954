"""What the figures were measured on: the machine, the software versions, the engine commit.

Benchmark figures mean little without these, and the engine changes quickly: the commit
and any uncommitted engine files are recorded so a figure can be tied to the code that
produced it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

from bench.cluster import Cluster, machine_cpu
from bench.procs import DBOS_PYTHON, PROCRASTINATE_PYTHON, ROOT


def machine_line() -> str:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    memory = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal"):
            memory = int(line.split()[1]) // 1024 // 1024
    return (
        f"{cpu}, {os.cpu_count()} cores, {memory} GiB RAM, Linux {platform.release()}, "
        f"{_virtualisation()}"
    )


def _virtualisation() -> str:
    product = Path("/sys/class/dmi/id/product_name")
    try:
        name = product.read_text().strip()
    except OSError:
        name = ""
    return f"VM ({name})" if name else "virtualisation unknown"


def busy_fraction(seconds: float = 2.0) -> float:
    """How busy the machine's cores were over the next ``seconds`` (0 idle, 1 saturated)."""
    before = machine_cpu()[0]
    time.sleep(seconds)
    return (machine_cpu()[0] - before) / (seconds * (os.cpu_count() or 1))


def wait_for_quiet(threshold: float = 0.25, patience: float = 20.0) -> float:
    """Wait (at most ``patience`` s) until other work leaves the cores mostly idle.

    The machine is shared: other sessions run tests on it. Starting a measurement when
    it is quiet removes most of their effect on the figures; the busy fraction found
    last is returned so the report can show how quiet it was.
    """
    deadline = time.monotonic() + patience
    while True:
        busy = busy_fraction()
        if busy <= threshold or time.monotonic() > deadline:
            return busy


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def versions(cluster: Cluster) -> dict[str, str]:
    found = {
        "Python (Wayline)": platform.python_version(),
        "psycopg": metadata.version("psycopg"),
        "psycopg-pool": metadata.version("psycopg-pool"),
    }
    with cluster.connect() as conn:
        found["PostgreSQL"] = conn.execute("SHOW server_version").fetchone()[0]
    for name, python, package, also in (
        ("DBOS", DBOS_PYTHON, "dbos", "sqlalchemy"),
        ("procrastinate", PROCRASTINATE_PYTHON, "procrastinate", "psycopg-pool"),
    ):
        found[name] = _peer_versions(python, package, also)
    pgbench = subprocess.run(
        [str(cluster.bin_dir / "pgbench"), "--version"], capture_output=True, text=True, check=True
    )
    found["pgbench"] = pgbench.stdout.strip()
    return found


def _peer_versions(python: Path, package: str, also: str) -> str:
    """A peer's version, with its environment's Python, ``also`` and psycopg versions."""
    script = (
        "import importlib.metadata as m, platform; "
        f"print(platform.python_version(), m.version('{package}'), m.version('{also}'), "
        "m.version('psycopg'))"
    )
    out = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    return f"{out[1]} (Python {out[0]}, {also} {out[2]}, psycopg {out[3]})"


def engine_revision(code: Path) -> tuple[str, list[str], str]:
    """HEAD, the engine and migration files of ``code`` that differ from HEAD, a digest.

    ``code`` is the snapshot the run executes, so the list says exactly which
    uncommitted changes the figures include; the digest names that code.
    """
    head = _git("rev-parse", "--short", "HEAD").strip()
    committed = {}
    for line in _git("ls-tree", "-r", "HEAD", "engine", "migrations").splitlines():
        meta, path = line.split("\t", 1)
        committed[path] = meta.split()[2]
    files = sorted(
        p
        for folder in ("engine", "migrations")
        for p in (code / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    names = [str(p.relative_to(code)) for p in files]
    hashes = _git("hash-object", *map(str, files)).split() if files else []
    current = dict(zip(names, hashes, strict=True))
    dirty = sorted(
        name for name in set(current) | set(committed) if current.get(name) != committed.get(name)
    )
    listing = "\n".join(f"{name} {current[name]}" for name in sorted(current))
    return head, dirty, hashlib.sha256(listing.encode()).hexdigest()[:12]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout
