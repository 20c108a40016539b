# An order in, its invoice out: tax at 20% of the amount, rounded to the
# nearest cent, and the total. An order without an order_id, or whose
# amount_cents is not a whole number of cents of at least 0, fails here
# and goes to the dead-letter table (PROCESSOR_ON_ERROR=dlq).
if (.order_id | type) != "string" then error("an order needs a string order_id")
elif (.amount_cents | type) != "number" or .amount_cents < 0 or .amount_cents != (.amount_cents | floor)
then error("order \(.order_id): amount_cents must be a whole number of cents, at least 0")
else {order_id, customer, amount_cents, tax_cents: (.amount_cents * 20 / 100 | round)}
  | .total_cents = .amount_cents + .tax_cents
end
