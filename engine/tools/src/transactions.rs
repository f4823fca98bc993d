//! `ringleader transactions`: list and describe transactions over the Kafka wire protocol,
//! output shaped like Kafka's `kafka-transactions.sh list` / `describe`
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

/// `ringleader transactions`: list the transactions every coordinator knows, or describe one
/// transactional id (like kafka-transactions.sh).
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
const FIND_COORDINATOR: ApiSpec = ApiSpec {
    key: 10,
    name: "FindCoordinator",
    min: 1,
    max: 6,
};

pub fn run(args: &TransactionsArgs, out: &mut dyn Write) -> i32 {
    let code = match (args.list, args.describe, &args.transactional_id) {
        (true, false, None) => list(args, out),
        (false, true, Some(id)) => describe(args, id, out),
        _ => {
            let _ = writeln!(
                out,
                "Error: give --list, or --describe with --transactional-id\n\
                 Try 'ringleader transactions --help' for usage."
            );
            2
        }
    };
    let _ = out.flush();
    code
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
