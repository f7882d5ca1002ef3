-- The nodes serving this store and their leases (docs/operations.md, "Several nodes"): each
-- node renews its row every third of its lease; a node whose lease ran out is gone, and another
-- node marks the gateways it held disconnected. A clean stop removes the row.
CREATE TABLE nodes (
    node_id      TEXT PRIMARY KEY NOT NULL,
    started_at   BIGINT NOT NULL,
    lease_until  BIGINT NOT NULL
);

-- Which node works each webhook's lane (its queue cut into batches and posted in order), and
-- until when: one node at a time, so that every batch is posted by one node, in order. A lane
-- whose node stopped renewing is taken by another node once its lease ran out.
CREATE TABLE webhook_lanes (
    id_webhook   TEXT PRIMARY KEY NOT NULL,
    node_id      TEXT NOT NULL,
    lease_until  BIGINT NOT NULL
);
