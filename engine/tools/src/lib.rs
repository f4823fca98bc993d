//! `tools`: the `ringleader` binary's client-side commands, outside the broker library.
//!
//! Owns: `ringleader groups` (an admin client for consumer groups over the Kafka wire protocol,
//! output shaped like `kafka-consumer-groups.sh`), `ringleader dump-log` (print or verify
//! `__consumer_offsets` segment files like `kafka-dump-log.sh --offsets-decoder`) and
//! `ringleader stats` (read a broker's metrics endpoint) and `ringleader transactions` (list and
//! describe transactions and describe a partition's producers, like `kafka-transactions.sh`) and
//! `ringleader users` (SCRAM credentials, like `kafka-configs.sh --entity-type users`) and
//! `ringleader acls` (add, remove and list ACLs, like `kafka-acls.sh`).
//!
//! Must not: depend on the broker (`engine`): the tools talk to a broker over its wire protocol or
//! read its files with `storage` and `wire`, so they work the same against Apache Kafka, and the
//! broker library does not carry them.

pub mod acls;
pub mod dump_log;
pub mod groups;
pub mod stats;
pub mod transactions;
pub mod users;
