"""Case 7: releases per second through ``dpledger serve`` with 8 concurrent HTTP clients.

dpledger's figure: a real ``dpledger serve`` process (uvicorn, 4 ledger connections, no
access log) on 127.0.0.1; 8 client threads in this process each POST
``/v1/releases`` of the release benchmark's 7-bucket histogram, every request carrying
its own Idempotency-Key, as fast as answers come back. Each request's latency is kept
for p50/p99. The baseline is the library's own rate in the same run and on the same
kind of store: a ``Ledger.release`` loop in this process. The two alternate, repeat by
repeat, each on a fresh epoch, so that load drift hits both alike.

What the ratio includes: HTTP and JSON both ways, key authentication (one indexed
lookup and one SHA-256 per request), validation, the thread pool, and the clients' own
CPU (they share this machine's 2 cores with the server). Run on SQLite (WAL,
synchronous=FULL) and on a throwaway PostgreSQL server (fsync=on).
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import Row, Sizes, fmt_rate, log
from benchmarks.pg_releases import _pgserver
from benchmarks.releases import AGGREGATE, BENCH_POLICY, bench_policy, request

__all__ = ["CLIENTS", "run"]

CLIENTS = 8


def _site(ledger: str, directory: Path) -> tuple[Path, str]:
    """A new ledger under the bench policy, and a key that may release anything."""
    from dpledger.ledger import Ledger
    from dpledger.service.keys import Scopes
    from dpledger.service.store import ServiceStore, default_location

    policy_path = directory / "bench-policy.toml"
    policy_path.write_text(BENCH_POLICY)
    with Ledger.open(ledger, bench_policy(), mode="create") as created:
        created.init()
    with ServiceStore.open(default_location(ledger), create=True) as store:
        made, _ = store.create_key("bench", Scopes(("release",)))
    return policy_path, made.token


def _http(url: str, token: str, n: int, epoch: int) -> tuple[float, list[float]]:
    """8 clients × ``n`` releases at ``epoch``: (releases/s, each request's latency in s)."""
    import httpx2

    latencies: list[list[float]] = [[] for _ in range(CLIENTS)]
    errors: list[str] = []
    barrier = threading.Barrier(CLIENTS + 1)
    headers = {"Authorization": f"Bearer {token}"}

    def client(c: int) -> None:
        with httpx2.Client(base_url=url, headers=headers, timeout=120) as http:
            bodies: list[dict[str, object]] = [
                {
                    "request": {**request(i, f"r{c}").model_dump(), "epoch": epoch},
                    "aggregate": list(AGGREGATE),
                }
                for i in range(n)
            ]
            barrier.wait()
            for i, b in enumerate(bodies):
                t0 = time.perf_counter()
                r = http.post(
                    "/v1/releases", json=b, headers={"Idempotency-Key": f"{epoch}/{c}/{i}"}
                )
                latencies[c].append(time.perf_counter() - t0)
                if r.status_code != 201:
                    errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
                    return

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    flat = [x for per in latencies for x in per]
    return len(flat) / wall, flat


def _library(ledger: Any, n: int, epoch: int) -> float:
    """``n`` sequential ``Ledger.release`` calls at ``epoch``: releases/s."""
    requests = [request(i, "r0").model_copy(update={"epoch": epoch}) for i in range(n)]
    t0 = time.perf_counter()
    for req in requests:
        ledger.release(req, AGGREGATE)
    return n / (time.perf_counter() - t0)


def _measure(store: str, ledger_url: str, baseline_url: str, sizes: Sizes, d: Path) -> Row:
    from dpledger.ledger import Ledger
    from dpledger.service.testing import ServedProcess

    n = sizes.pg_releases  # per client: 60 (full), 10 (quick); < 1,000 per epoch
    policy, token = _site(ledger_url, d)
    _site(baseline_url, d)
    http_rates: list[float] = []
    lib_rates: list[float] = []
    latencies: list[float] = []
    with (
        ServedProcess(
            ledger_url,
            policy,
            "--log-level",
            "warning",
            "--no-access-log",
            log=d / f"serve-{store}.log",
        ) as server,
        Ledger.open(baseline_url, bench_policy()) as library,
    ):
        _http(server.url, token, 2, 0)  # warm both: imports, OpenDP caches, connections
        _library(library, 2, 0)
        for rep in range(max(1, sizes.pg_repeats)):
            epoch = 1 + rep
            log(f"case 7: {store}, repeat {rep + 1}: library, then {CLIENTS} HTTP clients")
            lib_rates.append(_library(library, n, epoch))
            rate, lat = _http(server.url, token, n, epoch)
            http_rates.append(rate)
            latencies += lat
    ours, lib = statistics.median(http_rates), statistics.median(lib_rates)
    cuts = statistics.quantiles(latencies, n=100)
    p50, p99 = cuts[49], cuts[98]
    return Row(
        case=7,
        measured=f"HTTP releases, {CLIENTS} clients, {store} (dpledger serve)",
        dpledger=f"{fmt_rate(ours, 'releases/s')}, p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms",
        baseline=f"{fmt_rate(lib, 'releases/s')} (Ledger.release loop)",
        ratio_text=f"{ours / lib:.2f}x library",
        target="report",
        met="info",
        ratio=ours / lib,
        values={
            "http_releases_per_s": ours,
            "library_releases_per_s": lib,
            "p50_ms": p50 * 1e3,
            "p99_ms": p99 * 1e3,
            "per_client": n,
            "repeats": len(http_rates),
        },
        note=f"{CLIENTS} client threads x {n} releases per repeat, medians of "
        f"{len(http_rates)}; latency over all {len(latencies)} requests; clients and "
        "server share the machine's CPUs",
    )


def _error(store: str, e: BaseException) -> Row:
    return Row(7, f"HTTP releases, {CLIENTS} clients, {store}", "error", "-", "-", "report",
               "error", note=f"{type(e).__name__}: {str(e)[:300]}")  # fmt: skip


def run(sizes: Sizes) -> list[Row]:
    """SQLite, then PostgreSQL (a throwaway server; a skipped row if none can start)."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="dpledger-bench-service-") as tmp:
        d = Path(tmp)
        try:
            rows.append(_measure("SQLite", str(d / "http.db"), str(d / "lib.db"), sizes, d))
        except Exception as e:  # one store's failure must not hide the other's figure
            rows.append(_error("SQLite", e))
        try:
            pgserver = _pgserver()
            server = pgserver.start()
        except Exception as e:
            label = f"HTTP releases, {CLIENTS} clients, PostgreSQL"
            rows.append(Row(7, label, f"skipped: {str(e)[:120]}", "-", "-", "report", "skipped"))
            return rows
        try:
            pg = (server.create_database(), server.create_database())
            rows.append(_measure("PostgreSQL", *pg, sizes, d))
        except Exception as e:
            rows.append(_error("PostgreSQL", e))
        finally:
            server.stop()
    return rows
