//! `security`: who a connection is and what it may do — Kafka's security model, without I/O.
//!
//! Owns:
//! - `principal`: [`Principal`], Kafka's `KafkaPrincipal` (`User:alice`), and the anonymous
//!   principal every connection of a PLAINTEXT listener carries (Kafka's `User:ANONYMOUS`).
//! - `sasl`: the SASL server mechanisms (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) as pure state
//!   machines: token in, answer out; nonces drawn and clock read by the caller.
//! - `jaas`: parsing of Kafka's `sasl.jaas.config` values (login module, flag, options).
//! - `scram_store`: the checksummed byte format of the broker's SCRAM credential file.
//! - `acl`: Kafka's ACL model (resource patterns, entries, filters, wire codes), the standard
//!   authorizer's decisions, CreateAcls' validation and the durable form of an ACL set.
//!
//! Must not: touch a socket, a thread or a clock (time is passed in, as in the coordinator), or
//! log a secret (a password, a SCRAM proof, a token). The broker (`engine`) owns the listeners,
//! the connection state and the durable files; this crate owns the rules and the formats.

pub mod acl;
pub mod jaas;
pub mod principal;
pub mod sasl;
pub mod scram_store;

pub use principal::Principal;
