//! `ringleader transactions`: list and describe transactions and describe a partition's
//! producers over the Kafka wire protocol, output shaped like Kafka's `kafka-transactions.sh
//! list` / `describe` / `describe-producers`
//! (`tools/src/main/java/org/apache/kafka/tools/TransactionsCommand.java`).
//!
//! A client, like `ringleader groups` (whose connection and table code it reuses): it runs
//! against Ringleader or any Kafka broker. Exit codes: 0 ok, 1 failure, 2 bad arguments.

use crate::groups::{error_name, format_table, AdminConnection, ApiSpec};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use wire::{Request, Response};

/// `ringleader transactions`: list the transactions every coordinator knows, describe one
/// transactional id, or describe the producers of one topic partition (like
/// kafka-transactions.sh).
#[derive(clap::Args, Debug)]
pub struct TransactionsArgs {
    /// Broker to connect to, host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// List transactional ids with their producer id and state.
    #[arg(long)]
    pub list: bool,
    /// Describe the transactional id given with --transactional-id.
    #[arg(long)]
    pub describe: bool,
    /// The transactional id to describe.
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// Describe the active producers of the partition given with --topic and --partition, as
    /// the broker connected to holds them (the partition's leader on a one-node cluster).
    #[arg(long)]
    pub describe_producers: bool,
    /// With --describe-producers: the topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// With --describe-producers: the partition.
    #[arg(long, allow_hyphen_values = true)]
    pub partition: Option<i32>,
    /// With --list: only transactions open for at least this many milliseconds.
    #[arg(long, allow_hyphen_values = true)]
    pub duration_filter: Option<i64>,
    /// Timeout for connecting and for each request.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
}

const LIST_TRANSACTIONS: ApiSpec = ApiSpec {
    key: 66,
    name: "ListTransactions",
    min: 0,
    max: 1,
};
const DESCRIBE_TRANSACTIONS: ApiSpec = ApiSpec {
    key: 65,
    name: "DescribeTransactions",
    min: 0,
    max: 0,
};
const DESCRIBE_PRODUCERS: ApiSpec = ApiSpec {
    key: 61,
    name: "DescribeProducers",
    min: 0,
    max: 0,
};
const FIND_COORDINATOR: ApiSpec = ApiSpec {
    key: 10,
    name: "FindCoordinator",
    min: 1,
    max: 6,
};

pub fn run(args: &TransactionsArgs, out: &mut dyn Write) -> i32 {
    let producers_args = (&args.topic, args.partition);
    let code = match (args.list, args.describe, args.describe_producers) {
        (true, false, false)
            if args.transactional_id.is_none() && producers_args == (&None, None) =>
        {
            list(args, out)
        }
        (false, true, false)
            if args.transactional_id.is_some() && producers_args == (&None, None) =>
        {
            describe(
                args,
                args.transactional_id.as_deref().unwrap_or_default(),
                out,
            )
        }
        (false, false, true) if args.transactional_id.is_none() => match producers_args {
            (Some(topic), Some(partition)) => describe_producers(args, topic, partition, out),
            _ => usage(out),
        },
        _ => usage(out),
    };
    let _ = out.flush();
    code
}

fn usage(out: &mut dyn Write) -> i32 {
    let _ = writeln!(
        out,
        "Error: give --list, --describe with --transactional-id, or --describe-producers with \
         --topic and --partition\n\
         Try 'ringleader transactions --help' for usage."
    );
    2
}

fn connect(args: &TransactionsArgs) -> Result<AdminConnection, String> {
    let timeout = Duration::from_millis(args.timeout_ms.clamp(1, 86_400_000));
    AdminConnection::connect(&args.bootstrap, timeout, "ringleader-transactions")
        .map_err(|e| e.message)
}

fn list(args: &TransactionsArgs, out: &mut dyn Write) -> i32 {
    let result = (|| -> Result<Vec<Vec<String>>, String> {
        let mut c = connect(args)?;
        let v = c.require(LIST_TRANSACTIONS).map_err(|e| e.message)?;
        let mut req = ListTransactionsRequest::default();
        if let Some(d) = args.duration_filter {
            if v < 1 {
                return Err("the broker's ListTransactions has no duration filter (v1)".into());
            }
            req.duration_filter = d;
        } else {
            req.duration_filter = -1;
        }
        let resp = match c
            .call(v, &Request::ListTransactions(req))
            .map_err(|e| e.message)?
        {
            Response::ListTransactions(r) => r,
            _ => return Err("the broker answered ListTransactions with another response".into()),
        };
        if resp.error_code != 0 {
            return Err(format!(
                "Failed to list transactions: {}",
                error_name(resp.error_code)
            ));
        }
        // One broker answers for every coordinator it hosts: its node id is the coordinator.
        let node = coordinator_of(&mut c, None)?;
        let mut rows: Vec<Vec<String>> = resp
            .transaction_states
            .iter()
            .map(|t| {
                vec![
                    t.transactional_id.0.to_string(),
                    node.to_string(),
                    t.producer_id.0.to_string(),
                    t.transaction_state.to_string(),
                ]
            })
            .collect();
        rows.sort();
        Ok(rows)
    })();
    match result {
        Ok(rows) => {
            for line in format_table(
                &[
                    "TransactionalId",
                    "Coordinator",
                    "ProducerId",
                    "TransactionState",
                ],
                &rows,
            ) {
                let _ = writeln!(out, "{line}");
            }
            0
        }
        Err(e) => {
            let _ = writeln!(out, "Error: {e}");
            1
        }
    }
}

/// The coordinator's node id for `transactional_id` (or the connected broker's node when
/// `None`): FindCoordinator with key type 1.
fn coordinator_of(c: &mut AdminConnection, transactional_id: Option<&str>) -> Result<i32, String> {
    let v = c.require(FIND_COORDINATOR).map_err(|e| e.message)?;
    let key = StrBytes::from_string(transactional_id.unwrap_or("ringleader").to_string());
    let mut req = FindCoordinatorRequest::default().with_key_type(1);
    if v >= 4 {
        req.coordinator_keys = vec![key];
    } else {
        req.key = key;
    }
    match c
        .call(v, &Request::FindCoordinator(req))
        .map_err(|e| e.message)?
    {
        Response::FindCoordinator(r) if v >= 4 => match r.coordinators.first() {
            Some(co) if co.error_code == 0 => Ok(co.node_id.0),
            Some(co) => Err(format!(
                "FindCoordinator failed: {}",
                error_name(co.error_code)
            )),
            None => Err("FindCoordinator returned no coordinator".into()),
        },
        Response::FindCoordinator(r) if r.error_code == 0 => Ok(r.node_id.0),
        Response::FindCoordinator(r) => Err(format!(
            "FindCoordinator failed: {}",
            error_name(r.error_code)
        )),
        _ => Err("the broker answered FindCoordinator with another response".into()),
    }
}

fn describe(args: &TransactionsArgs, id: &str, out: &mut dyn Write) -> i32 {
    let result = (|| -> Result<Vec<String>, String> {
        let mut c = connect(args)?;
        let node = coordinator_of(&mut c, Some(id))?;
        let v = c.require(DESCRIBE_TRANSACTIONS).map_err(|e| e.message)?;
        let req = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(StrBytes::from_string(id.to_string()))]);
        let resp = match c
            .call(v, &Request::DescribeTransactions(req))
            .map_err(|e| e.message)?
        {
            Response::DescribeTransactions(r) => r,
            _ => {
                return Err("the broker answered DescribeTransactions with another response".into())
            }
        };
        let Some(t) = resp.transaction_states.first() else {
            return Err("DescribeTransactions returned nothing".into());
        };
        if t.error_code != 0 {
            return Err(format!(
                "Failed to describe transaction state of transactional-id `{id}`: {}",
                error_name(t.error_code)
            ));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let (start, duration) = if t.transaction_start_time_ms >= 0 {
            (
                t.transaction_start_time_ms.to_string(),
                (now - t.transaction_start_time_ms).to_string(),
            )
        } else {
            ("None".to_string(), "None".to_string())
        };
        let partitions: Vec<String> = t
            .topics
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .map(move |p| format!("{}-{p}", tp.topic.0))
            })
            .collect();
        Ok(vec![
            node.to_string(),
            id.to_string(),
            t.producer_id.0.to_string(),
            t.producer_epoch.to_string(),
            t.transaction_state.to_string(),
            t.transaction_timeout_ms.to_string(),
            start,
            duration,
            partitions.join(","),
        ])
    })();
    match result {
        Ok(row) => {
            for line in format_table(
                &[
                    "CoordinatorId",
                    "TransactionalId",
                    "ProducerId",
                    "ProducerEpoch",
                    "TransactionState",
                    "TransactionTimeoutMs",
                    "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs",
                    "TopicPartitions",
                ],
                &[row],
            ) {
                let _ = writeln!(out, "{line}");
            }
            0
        }
        Err(e) => {
            let _ = writeln!(out, "Error: {e}");
            1
        }
    }
}

/// `kafka-transactions.sh describe-producers` (`DescribeProducersCommand`): one row per active
/// producer of the partition, with a coordinator epoch of -1 and a start offset of `None` where
/// the broker reports none (the admin client's `OptionalInt` / `OptionalLong`, set only when
/// the wire value is not negative).
fn describe_producers(
    args: &TransactionsArgs,
    topic: &str,
    partition: i32,
    out: &mut dyn Write,
) -> i32 {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    let result = (|| -> Result<Vec<Vec<String>>, String> {
        let mut c = connect(args)?;
        let v = c.require(DESCRIBE_PRODUCERS).map_err(|e| e.message)?;
        let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_indexes(vec![partition])]);
        let resp = match c
            .call(v, &Request::DescribeProducers(req))
            .map_err(|e| e.message)?
        {
            Response::DescribeProducers(r) => r,
            _ => return Err("the broker answered DescribeProducers with another response".into()),
        };
        let failed = |why: String| {
            format!(
                "Failed to describe producers for partition {topic}-{partition} on leader: {why}"
            )
        };
        let Some(p) = resp
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition)
        else {
            return Err(failed("the broker did not answer for the partition".into()));
        };
        if p.error_code != 0 {
            let mut why = error_name(p.error_code);
            if let Some(m) = &p.error_message {
                why = format!("{why} ({m})");
            }
            return Err(failed(why));
        }
        Ok(p.active_producers
            .iter()
            .map(|a| {
                vec![
                    a.producer_id.0.to_string(),
                    a.producer_epoch.to_string(),
                    a.coordinator_epoch.max(-1).to_string(),
                    a.last_sequence.to_string(),
                    a.last_timestamp.to_string(),
                    if a.current_txn_start_offset < 0 {
                        "None".to_string()
                    } else {
                        a.current_txn_start_offset.to_string()
                    },
                ]
            })
            .collect())
    })();
    match result {
        Ok(rows) => {
            for line in format_table(
                &[
                    "ProducerId",
                    "ProducerEpoch",
                    "LatestCoordinatorEpoch",
                    "LastSequence",
                    "LastTimestamp",
                    "CurrentTransactionStartOffset",
                ],
                &rows,
            ) {
                let _ = writeln!(out, "{line}");
            }
            0
        }
        Err(e) => {
            let _ = writeln!(out, "Error: {e}");
            1
        }
    }
}
