-- V0004: delivery bookkeeping: dead letters, the stored Kafka offsets, the ingest batch ids.
--
-- Run by `trackd migrate`, or by hand:  psql -1 -v ON_ERROR_STOP=1 -f V0004__delivery.sql
-- No BEGIN/COMMIT here: the runner wraps each file in one transaction (psql does with -1).
-- Safe to run twice.

-- Messages that were read but not accepted, with the reason, written in the same transaction as
-- the batch they came in. The unique (topic, partition, offset) makes a replayed message a no-op
-- (ON CONFLICT DO NOTHING) rather than a second row.
CREATE TABLE IF NOT EXISTS trackd.dead_letters (
  id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  topic           text        NOT NULL,
  kafka_partition int         NOT NULL,
  kafka_offset    bigint      NOT NULL,
  received_at     timestamptz NOT NULL DEFAULT now(),
  reason_code     text        NOT NULL,
  detail          text        NOT NULL,
  raw_payload     bytea,
  ingest_batch_id bigint      NOT NULL
);
COMMENT ON TABLE trackd.dead_letters IS
  'Kafka messages trackd read but refused (malformed, out of range, ...), one row per message, with the reason and the raw payload.';
COMMENT ON COLUMN trackd.dead_letters.reason_code IS 'Machine-readable reason, e.g. json_malformed, lat_out_of_range.';
COMMENT ON COLUMN trackd.dead_letters.detail IS 'Human-readable explanation.';
COMMENT ON COLUMN trackd.dead_letters.raw_payload IS 'The message value exactly as received (may be truncated for huge messages).';

CREATE UNIQUE INDEX IF NOT EXISTS dead_letters_message_key
  ON trackd.dead_letters (topic, kafka_partition, kafka_offset);
CREATE INDEX IF NOT EXISTS dead_letters_reason_code_idx
  ON trackd.dead_letters (reason_code);

-- The source of truth for where consumption resumes: updated in the same transaction as the rows
-- it covers, so a crash never loses or duplicates a batch. owner_epoch fences off an instance
-- that lost the partition to another one: it updates only WHERE owner_epoch = its own epoch.
CREATE TABLE IF NOT EXISTS trackd.kafka_offsets (
  consumer_group  text,
  topic           text,
  kafka_partition int,
  next_offset     bigint      NOT NULL,
  owner_epoch     bigint      NOT NULL DEFAULT 0,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer_group, topic, kafka_partition)
);
COMMENT ON TABLE trackd.kafka_offsets IS
  'Per consumer group and Kafka partition: the next offset to read, committed atomically with the data. Kafka''s own committed offsets only serve lag monitoring.';
COMMENT ON COLUMN trackd.kafka_offsets.next_offset IS 'Offset of the first message not yet in the database.';
COMMENT ON COLUMN trackd.kafka_offsets.owner_epoch IS 'Incremented by each instance that takes the partition over; commits require the epoch to be unchanged.';

-- One value per ingest transaction, stored in every row it writes; the archive uses it as a watermark.
CREATE SEQUENCE IF NOT EXISTS trackd.ingest_batch_id_seq AS bigint;
COMMENT ON SEQUENCE trackd.ingest_batch_id_seq IS 'Ingest batch ids (ingest_batch_id columns).';

GRANT SELECT, INSERT, UPDATE ON trackd.dead_letters, trackd.kafka_offsets TO trackd_ingest;
GRANT USAGE ON SEQUENCE trackd.ingest_batch_id_seq TO trackd_ingest;
GRANT SELECT ON trackd.dead_letters, trackd.kafka_offsets TO trackd_api, trackd_readonly;

INSERT INTO trackd.schema_migrations (version, name) VALUES (4, 'delivery')
ON CONFLICT (version) DO NOTHING;
