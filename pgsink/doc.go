// Package pgsink is the PostgreSQL sink, registered as "postgres" (see
// Settings) and implementing sink.Transactional: it writes a batch's
// output rows, its dead letters and the consumed offsets in one PostgreSQL
// transaction, so that a crash or a rebalance can neither lose nor
// duplicate a row.
//
// Exactly once rests on the offsets table, not on the output table: each
// consumer group has one row per input partition holding the next offset
// to consume. Commit moves it from the offset the caller read it at
// (OffsetUpdate.Expected) to the offset after the batch (OffsetUpdate.Next)
// with a conditional UPDATE (or an INSERT for a partition without a row)
// in the same transaction as the rows. If another instance moved it in
// between, the update finds no row, the whole transaction is rolled back,
// and Commit returns a *sink.FencedError: the caller reloads the stored offsets
// with Offsets and resumes from there. Two instances writing the same
// partition at once serialise on its offsets row; exactly one commits.
//
// Outputs go to a table of the sink's own (Options.Table, written with
// COPY) or through the user's SQL statement (Options.Statement, run once
// per row, e.g. an upsert). Failures are the sink contract's types (package
// sink): a *settings.Error for a setting that cannot work (exit code 2), a
// *sink.RefusedError for a server that refuses the user, the password or
// the database, a *sink.FencedError, a *sink.RowError for one row that
// the database refused (the caller applies its error policy to that
// input), a *sink.PersistentError; for any other error, Retriable tells
// whether trying the same batch again later can help.
package pgsink
