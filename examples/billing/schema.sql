-- The billing example's table: one invoice per order, written by the
-- statement in invoice.sql. The processor creates its own tables
-- (processor_offsets, processor_dead_letters) beside it; this one is the
-- user's, so it is created here. Unqualified: it lands in the first schema
-- of the session's search_path.
CREATE TABLE IF NOT EXISTS invoices (
    order_id         text PRIMARY KEY,
    customer         text NOT NULL,
    amount_cents     bigint NOT NULL CHECK (amount_cents >= 0),
    tax_cents        bigint NOT NULL CHECK (tax_cents >= 0),
    total_cents      bigint NOT NULL CHECK (total_cents = amount_cents + tax_cents),
    -- The order's record in Kafka, for the audit.
    source_topic     text NOT NULL,
    source_partition int NOT NULL,
    source_offset    bigint NOT NULL,
    invoiced_at      timestamptz NOT NULL DEFAULT now()
);
