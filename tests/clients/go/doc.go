// Package clientsgo holds the franz-go (kgo + kadm) client tests for Ringleader.
//
// Every test starts the real `ringleader serve` binary (RINGLEADER_BIN, default
// <repo>/target/release/ringleader) on a free 127.0.0.1 port with a fresh data
// directory, or uses the broker at KAFKA_BOOTSTRAP when that is set (to check the
// tests themselves against Apache Kafka). Run them with ./run.sh.
package clientsgo
