-- The points one ingest transaction queues for one webhook in one outbox row
-- (store/src/tables/webhooks/packed.rs; docs/benchmarks.md, "Webhooks"): `points` holds them
-- packed in the order they were sent, `items` how many. Rows queued before (one point or one
-- event each) keep `items` 1 and no `points`.
ALTER TABLE webhook_outbox ADD COLUMN items BIGINT NOT NULL DEFAULT 1;
ALTER TABLE webhook_outbox ADD COLUMN points BYTEA;
