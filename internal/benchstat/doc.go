// Package benchstat reads what a benchmark cost a PostgreSQL server and the
// process: commits and rows written in the benchmark's database (from
// pg_stat_database), transaction ids assigned, the server's durability
// settings, and the process's peak resident set size. The benchmarks of
// cmd/reconciler and the comparison programs of the bench/ module report
// these figures under the same JSON names.
//
// Invariants:
//   - A server counts a backend's work in pg_stat_database only when the
//     backend flushes its statistics: at most once a second while busy, up
//     to ten seconds after it went idle, and always when it exits. Counters
//     are therefore read only after Settle saw every connection of the
//     measured process's application name end, so each Counters value holds
//     everything those connections did.
//   - The package speaks plain pgx and knows nothing of the adapters.
package benchstat
