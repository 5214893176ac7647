-- Prompt caching: of a request's input tokens, how many were read from the
-- provider's cache and how many written to it (each billed at its own price).
ALTER TABLE usage ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
