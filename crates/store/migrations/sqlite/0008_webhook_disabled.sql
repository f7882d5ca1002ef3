-- Failing webhooks (docs/api.md, "Webhooks"): a webhook the service set inactive keeps why
-- (`retry_window` or `backlog`) and when, until a client activates it again.
ALTER TABLE webhooks ADD COLUMN disabled_reason TEXT;
ALTER TABLE webhooks ADD COLUMN disabled_at INTEGER;
