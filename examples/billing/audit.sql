-- The billing audit: one statement, so one snapshot. The invoices, the
-- dead letters and the consumed offsets commit in one transaction, so the
-- figures agree at any moment: while the processor runs, and after a
-- crash. With the search_path on the example's schema:
--   bash integration/postgres/pg.sh psql -qx -c 'SET search_path = billing' -f examples/billing/audit.sql
-- orders_consumed is the sum of the group's next offsets: the input
-- records consumed, as long as the topic's offsets start at 0 with no gaps
-- (a fresh topic written without transactions, as loadgen writes it).
-- unaccounted is consumed orders with neither an invoice nor a dead
-- letter: 0, unless the input holds an order_id twice (a replay), which
-- ON CONFLICT (order_id) DO NOTHING does not invoice again.
WITH consumed AS (
    SELECT coalesce(sum(next_offset), 0) AS n
    FROM processor_offsets
    WHERE "group" = 'billing' AND topic = 'orders'
), invoiced AS (
    SELECT count(*) AS n,
           count(DISTINCT (source_topic, source_partition, source_offset)) AS records,
           coalesce(sum(amount_cents), 0) AS amount_cents,
           coalesce(sum(tax_cents), 0) AS tax_cents,
           coalesce(sum(total_cents), 0) AS total_cents,
           count(*) FILTER (WHERE tax_cents <> round(amount_cents * 0.2)
                               OR total_cents <> amount_cents + tax_cents) AS wrong_amounts
    FROM invoices
    WHERE source_topic = 'orders'
), dead AS (
    SELECT count(*) AS n
    FROM processor_dead_letters
    WHERE src_topic = 'orders'
)
SELECT consumed.n                           AS orders_consumed,
       invoiced.n                           AS invoices,
       dead.n                               AS dead_letters,
       consumed.n - invoiced.n - dead.n     AS unaccounted,
       invoiced.n - invoiced.records        AS records_invoiced_twice,
       invoiced.amount_cents,
       invoiced.tax_cents,
       invoiced.total_cents,
       invoiced.wrong_amounts
FROM consumed, invoiced, dead;
