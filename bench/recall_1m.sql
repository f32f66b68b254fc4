DROP SCHEMA IF EXISTS recall_bench CASCADE;
CREATE SCHEMA recall_bench; SET search_path = recall_bench;
CREATE TABLE workstreams (id bigserial primary key);
CREATE TABLE compaction_runs (id bigserial primary key, finished_at timestamptz not null default now());
CREATE TABLE messages (id bigserial primary key, workstream_id bigint not null, role varchar(16) not null, parts text not null,
  token_estimate bigint not null default 10, pinned boolean not null default false, is_compacted boolean not null default false,
  created_at timestamptz not null default now(), client_id varchar(255), compacted_by_run_id bigint);
CREATE INDEX idx_messages_workstream_compacted_id ON messages (workstream_id, is_compacted, id);
INSERT INTO workstreams SELECT FROM generate_series(1,10);
INSERT INTO compaction_runs SELECT FROM generate_series(1,100);
-- 1M messages: 900k in workstream 1, 100k spread over 2..10. Words: 'common' in every message,
-- 'medium' in 1%, a unique 'rare<i>' in each, 'weekly' in 0.1%.
INSERT INTO messages (workstream_id, role, parts, is_compacted, compacted_by_run_id)
SELECT CASE WHEN i % 10 = 0 THEN 2 + (i % 9) ELSE 1 END, 'user',
  json_build_array(json_build_object('type','text','text',
    'common words about the build rare' || i || ' ' || CASE WHEN i % 100 = 0 THEN 'medium ' ELSE '' END
    || CASE WHEN i % 1000 = 0 THEN 'weekly ' ELSE '' END || md5(i::text)))::text,
  i < 950000, CASE WHEN i < 950000 THEN 1 + i / 10000 END
FROM generate_series(1, 1000000) AS i;
-- then the function of migrations/src/m20261127_000002_add_message_search.rs
\timing on
ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, compactor_message_search_text(parts))) STORED;
CREATE INDEX idx_messages_search ON messages USING gin (search);
CREATE INDEX idx_messages_workstream_id ON messages (workstream_id, id);
ANALYZE messages;
