"""The partitioning plan of docs/SCALING.md, tried on the 1M data set.

    .venv/bin/python bench/partition.py [--messages 1000000] [--partitions 32] [--repeat 30]

Loads ``bench/scale.py``'s data set (COPY, one 10,000-message session among ~10,000), then builds
``sessions_app_message`` again as a table partitioned by hash of ``session_id`` with the same
columns, constraints and indexes (each unique constraint includes the partition key, as PostgreSQL
requires), copies the rows in batches of sessions as the migration would, and times, on both tables
in the same run (medians of ``--repeat``): the queries an append and a context read make, a
session's count, and one append's insert. Prints the copy's time per million rows and both plans'
shapes. It changes nothing the application reads: the partitioned table is dropped at the end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import gunicorn_on_postgres
from bench.scale import grow, make_team, setup_django

PARTITIONED = "message_by_session"
COLUMNS = (
    "session_id, seq, role, content, tokens, tokens_exact, client_id, state, compaction_id, metadata, "
    "created_at, received_at"
)


def build(cursor, partitions: int) -> None:
    cursor.execute(f"DROP TABLE IF EXISTS {PARTITIONED}")
    cursor.execute(
        f"CREATE TABLE {PARTITIONED} (LIKE sessions_app_message INCLUDING DEFAULTS) PARTITION BY HASH (session_id)"
    )
    for k in range(partitions):
        cursor.execute(
            f"CREATE TABLE {PARTITIONED}_{k} PARTITION OF {PARTITIONED} "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {k})"
        )
    cursor.execute(f"ALTER TABLE {PARTITIONED} ADD PRIMARY KEY (session_id, id)")
    cursor.execute(f"CREATE UNIQUE INDEX ON {PARTITIONED} (session_id, seq)")
    cursor.execute(f"CREATE INDEX ON {PARTITIONED} (session_id, state, seq)")
    cursor.execute(f"CREATE UNIQUE INDEX ON {PARTITIONED} (session_id, client_id) WHERE client_id IS NOT NULL")
    cursor.execute(f"CREATE INDEX ON {PARTITIONED} (compaction_id) WHERE compaction_id IS NOT NULL")


def copy_in_batches(cursor, batch: int = 500) -> tuple[float, int]:
    """The migration's copy: sessions in id order, ``batch`` at a time, one statement each."""
    cursor.execute("SELECT id FROM sessions_app_agentsession ORDER BY id")
    ids = [row[0] for row in cursor.fetchall()]
    t0 = time.perf_counter()
    for k in range(0, len(ids), batch):
        cursor.execute(
            f"INSERT INTO {PARTITIONED} (id, {COLUMNS}) SELECT id, {COLUMNS} FROM sessions_app_message "
            "WHERE session_id BETWEEN %s AND %s",
            [ids[k], ids[min(k + batch, len(ids)) - 1]],
        )
    cursor.execute(f"ANALYZE {PARTITIONED}")
    cursor.execute(f"SELECT count(*) FROM {PARTITIONED}")
    return time.perf_counter() - t0, cursor.fetchone()[0]


def timed(cursor, sql: str, params: list, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        cursor.execute(sql, params)
        cursor.fetchall()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def plan_of(cursor, sql: str, params: list) -> str:
    cursor.execute("EXPLAIN " + sql, params)
    lines = [row[0].strip() for row in cursor.fetchall()]
    return " / ".join(line.split("  (")[0] for line in lines if "Scan" in line or "Append" in line)[:110]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with gunicorn_on_postgres("ctxweb_bench_partition", workers=1) as (_hostport, env):
        setup_django(env)
        from django.db import connection

        team = make_team()
        grow(team, args.messages, random.Random(16))
        big = team["big"].pk
        with connection.cursor() as cursor:
            build(cursor, args.partitions)
            seconds, rows = copy_in_batches(cursor)
            print(f"copied {rows:,} messages into {args.partitions} hash partitions in {seconds:.1f} s "
                  f"({seconds / rows * 1e6:.1f} s per million), in batches of 500 sessions")  # fmt: skip
            cursor.execute("SELECT max(seq) FROM sessions_app_message WHERE session_id = %s", [big])
            last = cursor.fetchone()[0]
            queries = [
                ("context read (active, by seq)",
                 "SELECT role, content FROM {t} WHERE session_id = %s AND state IN ('active','compacted') "
                 "ORDER BY seq",
                 [big]),
                ("client id lookup (append)", "SELECT id FROM {t} WHERE session_id = %s AND client_id = ANY(%s)",
                 [big, [f"s{big}-5", f"s{big}-9000"]]),
                ("newest 100 (a timeline page)",
                 "SELECT seq FROM {t} WHERE session_id = %s ORDER BY seq DESC LIMIT 100", [big]),
                ("a session's count", "SELECT count(*) FROM {t} WHERE session_id = %s", [big]),
            ]  # fmt: skip
            print(f"\n{'query (10,000-message session)':34} {'plain ms':>9} {'partitioned ms':>15}  plans")
            for name, sql, params in queries:
                plain = timed(cursor, sql.format(t="sessions_app_message"), params, args.repeat)
                split = timed(cursor, sql.format(t=PARTITIONED), params, args.repeat)
                print(f"{name:34} {plain:9.2f} {split:15.2f}  {plan_of(cursor, sql.format(t=PARTITIONED), params)}")
            # The id from the plain table's sequence: LIKE copies no identity (the migration would move it).
            insert = (
                "INSERT INTO {t} (id, session_id, seq, role, content, tokens, client_id, state, metadata, created_at, "
                "received_at) VALUES (nextval(pg_get_serial_sequence('sessions_app_message', 'id')), %s, %s, 'user', "
                "'\"hi\"', 1, NULL, 'active', '{{}}', now(), now())"
            )
            for label, table, start in (
                ("plain", "sessions_app_message", last + 1),
                ("partitioned", PARTITIONED, last + 1),
            ):
                times = []
                for i in range(args.repeat):
                    t0 = time.perf_counter()
                    cursor.execute(insert.format(t=table), [big, start + i])
                    times.append((time.perf_counter() - t0) * 1000)
                print(f"{'one append insert (' + label + ')':34} {statistics.median(times):9.2f}")
            cursor.execute(f"DROP TABLE {PARTITIONED}")


if __name__ == "__main__":
    main()
