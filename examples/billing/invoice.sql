INSERT INTO invoices (order_id, customer, amount_cents, tax_cents, total_cents,
                      source_topic, source_partition, source_offset)
SELECT i.order_id, i.customer, i.amount_cents, i.tax_cents, i.total_cents,
       @topic, @partition, @offset
FROM jsonb_to_record(@value::jsonb)
  AS i(order_id text, customer text, amount_cents bigint, tax_cents bigint, total_cents bigint)
ON CONFLICT (order_id) DO NOTHING
