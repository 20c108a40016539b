# An order in (decoded from Avro: plain JSON), the same order with three
# fields more out (encoded with order-enriched.avsc): the total with 20%
# tax, rounded to the cent; the number of units; and the channel, bulk for
# three or more lines.
.total_with_tax_cents = (.amount_cents * 120 / 100 | round)
| .item_count = (.items | map(.quantity) | add // 0)
| .channel = (if (.items | length) >= 3 then "bulk" else "retail" end)
