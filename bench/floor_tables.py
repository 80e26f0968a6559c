"""The tables behind the floors, shared by the DRF floors and the limit floor (no Django here:
the limit floor must not load it)."""

WRITE_TABLE = "bench_floor_write"
READ_TABLE = "bench_floor_read"
WINDOW = 20

# The write floor: one row per request, a serial key and nothing else.
# The read floor: rows keyed (grp, seq) like messages' (session, seq), read newest first by
# that key, so the only plan is the backward index scan the context endpoint uses too.
CREATE_TABLES_SQL = (
    f"""CREATE TABLE {WRITE_TABLE} (
        id bigserial PRIMARY KEY,
        role varchar(16) NOT NULL,
        content json,
        created_at timestamptz NOT NULL DEFAULT now()
    )""",
    f"""CREATE TABLE {READ_TABLE} (
        grp integer NOT NULL,
        seq integer NOT NULL,
        role varchar(16) NOT NULL,
        content json,
        PRIMARY KEY (grp, seq)
    )""",
)
WRITE_SQL = f"INSERT INTO {WRITE_TABLE} (role, content) VALUES (%s, %s) RETURNING id"  # noqa: S608
READ_SQL = f"SELECT role, content FROM {READ_TABLE} WHERE grp = %s ORDER BY seq DESC LIMIT %s"  # noqa: S608
READ_GROUP = 0
