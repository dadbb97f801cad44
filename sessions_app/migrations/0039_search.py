"""Full-text search (docs/SEARCH.md): on PostgreSQL, the words of every message and of every original a
compaction replaced are kept beside it (a generated ``search`` column, maintained by the database on
every write) under a GIN index; checkpoints and handoff documents are indexed by expression. A
message's words are its JSON's strings, without block types, tool ids and long payloads without a
space (base64 images), at most 200,000 characters (a tsvector holds at most 1 MB). On SQLite nothing
is added: search reads the JSON text (``selectors/search.py``).

Adding a stored column rewrites the two tables: on a large database, run it in a quiet hour."""

from django.db import migrations

SEARCH_TEXT = r"""
CREATE OR REPLACE FUNCTION ctx_search_text(doc jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT left(coalesce(string_agg(s, E'\n'), ''), 200000) FROM (
    SELECT v #>> '{}' AS s FROM jsonb_path_query(doc, 'strict $.** ? (@.type() == "string")') AS v
  ) strings
  WHERE (length(s) < 20000 OR s ~ '\s')
    AND s NOT IN ('text', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking', 'image', 'document',
                  'base64', 'input_text', 'output_text', 'function_call', 'function_call_output', 'message',
                  'reasoning', 'ephemeral', 'user', 'assistant', 'tool', 'system')
    AND s !~ '^(toolu|srvtoolu|call|msg|req|fc|rs)_[A-Za-z0-9]+$'
$$
"""

FORWARD = [
    SEARCH_TEXT,
    "ALTER TABLE sessions_app_message ADD COLUMN search tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, ctx_search_text(content))) STORED",
    "CREATE INDEX message_search ON sessions_app_message USING gin (search)",
    "ALTER TABLE sessions_app_messagebackup ADD COLUMN search tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, ctx_search_text(content))) STORED",
    "CREATE INDEX backup_search ON sessions_app_messagebackup USING gin (search)",
    "CREATE INDEX checkpoint_search ON sessions_app_checkpoint "
    "USING gin (to_tsvector('english'::regconfig, ctx_search_text(data)))",
    "CREATE INDEX handoff_search ON sessions_app_handoffdocument "
    "USING gin (to_tsvector('english'::regconfig, left(text, 200000)))",
]
BACKWARD = [
    "DROP INDEX IF EXISTS handoff_search",
    "DROP INDEX IF EXISTS checkpoint_search",
    "ALTER TABLE sessions_app_messagebackup DROP COLUMN IF EXISTS search",
    "ALTER TABLE sessions_app_message DROP COLUMN IF EXISTS search",
    "DROP FUNCTION IF EXISTS ctx_search_text(jsonb)",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in FORWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0038_redaction"),
    ]

    operations = [migrations.RunPython(forward, backward)]
