//! The broker's own measurements: latency per API (queue wait, handling, total) and time parked
//! for durability, counts per API and error code, fsyncs and batch sizes, groups and members,
//! rebalances and partition load times.
//!
//! Each shard records into its own `ShardMetrics` (no sharing on the hot path) and publishes a
//! copy once a second into its slot of a process-wide `MetricsHub`; a reader (the Prometheus
//! endpoint behind `--metrics-listen`, read by `ringleader stats`) merges the slots. Latencies are
//! HdrHistograms in microseconds, 3 significant digits, up to one hour.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

const MAX_US: u64 = 3_600_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid bounds")
}

/// Latency and outcome counts of one API on one shard.
#[derive(Clone)]
pub struct ApiStats {
    /// Frame decoded → handler started.
    pub queue_us: Histogram<u64>,
    /// Handler started → response ready (includes waiting for fsync, and for cross-shard calls).
    pub handle_us: Histogram<u64>,
    /// Frame decoded → response frame encoded.
    pub total_us: Histogram<u64>,
    pub by_error: BTreeMap<i16, u64>,
}

impl Default for ApiStats {
    fn default() -> Self {
        Self {
            queue_us: histogram(),
            handle_us: histogram(),
            total_us: histogram(),
            by_error: BTreeMap::new(),
        }
    }
}

#[derive(Clone)]
pub struct ShardMetrics {
    pub apis: BTreeMap<i16, ApiStats>,
    /// Response parked waiting for its partition's records to be durable.
    pub durable_wait_us: Histogram<u64>,
    /// One journal round: one write + one fdatasync covering every partition's batch in it.
    pub fsync_us: Histogram<u64>,
    /// Records per partition batch.
    pub batch_records: Histogram<u64>,
    /// Partition batches (and cuts) per journal round: how many partitions one fdatasync served.
    pub journal_round_batches: Histogram<u64>,
    pub fsyncs: u64,
    pub records_written: u64,
    pub write_failures: u64,
    /// One slice of a compaction pass (the longest a pass holds up its partition's writes).
    pub compaction_slice_us: Histogram<u64>,
    /// One slice of a snapshot build (captured on the shard between group commits).
    pub snapshot_slice_us: Histogram<u64>,
    pub compaction_passes: u64,
    /// Log bytes a compaction pass removed (before minus after).
    pub compaction_bytes_removed: u64,
    /// Gauges, refreshed when published.
    pub classic_groups: u64,
    pub consumer_groups: u64,
    pub members: u64,
    pub rebalances: u64,
    /// (partition, load milliseconds, records) from start-up.
    pub loads: Vec<(i32, u64, u64)>,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        Self {
            apis: BTreeMap::new(),
            durable_wait_us: histogram(),
            fsync_us: histogram(),
            batch_records: Histogram::new_with_bounds(1, 1 << 24, 3).expect("valid bounds"),
            journal_round_batches: Histogram::new_with_bounds(1, 1 << 24, 3).expect("valid bounds"),
            fsyncs: 0,
            records_written: 0,
            write_failures: 0,
            compaction_slice_us: histogram(),
            snapshot_slice_us: histogram(),
            compaction_passes: 0,
            compaction_bytes_removed: 0,
            classic_groups: 0,
            consumer_groups: 0,
            members: 0,
            rebalances: 0,
            loads: Vec::new(),
        }
    }
}

impl ShardMetrics {
    pub fn record_request(
        &mut self,
        api_key: i16,
        error: i16,
        queue_us: u64,
        handle_us: u64,
        total_us: u64,
    ) {
        let s = self.apis.entry(api_key).or_default();
        let _ = s.queue_us.record(queue_us.clamp(1, MAX_US));
        let _ = s.handle_us.record(handle_us.clamp(1, MAX_US));
        let _ = s.total_us.record(total_us.clamp(1, MAX_US));
        *s.by_error.entry(error).or_default() += 1;
    }

    fn merge(&mut self, o: &ShardMetrics) {
        for (k, s) in &o.apis {
            let d = self.apis.entry(*k).or_default();
            let _ = d.queue_us.add(&s.queue_us);
            let _ = d.handle_us.add(&s.handle_us);
            let _ = d.total_us.add(&s.total_us);
            for (e, n) in &s.by_error {
                *d.by_error.entry(*e).or_default() += n;
            }
        }
        let _ = self.durable_wait_us.add(&o.durable_wait_us);
        let _ = self.fsync_us.add(&o.fsync_us);
        let _ = self.batch_records.add(&o.batch_records);
        let _ = self.journal_round_batches.add(&o.journal_round_batches);
        self.fsyncs += o.fsyncs;
        self.records_written += o.records_written;
        self.write_failures += o.write_failures;
        let _ = self.compaction_slice_us.add(&o.compaction_slice_us);
        let _ = self.snapshot_slice_us.add(&o.snapshot_slice_us);
        self.compaction_passes += o.compaction_passes;
        self.compaction_bytes_removed += o.compaction_bytes_removed;
        self.classic_groups += o.classic_groups;
        self.consumer_groups += o.consumer_groups;
        self.members += o.members;
        self.rebalances += o.rebalances;
        self.loads.extend(o.loads.iter().copied());
    }
}

/// Where shards publish; read by the metrics endpoint.
#[derive(Default)]
pub struct MetricsHub {
    slots: Mutex<BTreeMap<usize, ShardMetrics>>,
}

impl std::fmt::Debug for MetricsHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsHub")
    }
}

impl MetricsHub {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Replace shard `shard`'s published copy (once a second per shard: not a hot path).
    pub fn publish(&self, shard: usize, m: ShardMetrics) {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(shard, m);
    }

    pub fn merged(&self) -> ShardMetrics {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut all = ShardMetrics::default();
        for m in slots.values() {
            all.merge(m);
        }
        all
    }

    /// Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        render(&self.merged())
    }
}

pub fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|_| format!("Api{key}"))
}

fn summary(out: &mut String, name: &str, labels: &str, h: &Histogram<u64>) {
    let sep = if labels.is_empty() { "" } else { "," };
    for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
        let _ = writeln!(
            out,
            "{name}{{{labels}{sep}quantile=\"{q}\"}} {}",
            h.value_at_quantile(q)
        );
    }
    let sum = h.mean() * h.len() as f64;
    let _ = writeln!(out, "{name}_sum{{{labels}}} {sum:.0}");
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.len());
}

pub fn render(m: &ShardMetrics) -> String {
    let mut out = String::new();
    out.push_str("# HELP ringleader_request_total_us Frame decoded to response encoded, microseconds.\n# TYPE ringleader_request_total_us summary\n");
    for (k, s) in &m.apis {
        summary(
            &mut out,
            "ringleader_request_total_us",
            &format!("api=\"{}\"", api_name(*k)),
            &s.total_us,
        );
    }
    out.push_str("# HELP ringleader_request_handle_us Handler start to response ready (includes fsync waits), microseconds.\n# TYPE ringleader_request_handle_us summary\n");
    for (k, s) in &m.apis {
        summary(
            &mut out,
            "ringleader_request_handle_us",
            &format!("api=\"{}\"", api_name(*k)),
            &s.handle_us,
        );
    }
    out.push_str("# HELP ringleader_request_queue_us Frame decoded to handler start, microseconds.\n# TYPE ringleader_request_queue_us summary\n");
    for (k, s) in &m.apis {
        summary(
            &mut out,
            "ringleader_request_queue_us",
            &format!("api=\"{}\"", api_name(*k)),
            &s.queue_us,
        );
    }
    out.push_str("# HELP ringleader_requests_total Requests answered, by API and error code.\n# TYPE ringleader_requests_total counter\n");
    for (k, s) in &m.apis {
        for (e, n) in &s.by_error {
            let _ = writeln!(
                out,
                "ringleader_requests_total{{api=\"{}\",error=\"{e}\"}} {n}",
                api_name(*k)
            );
        }
    }
    out.push_str("# HELP ringleader_durable_wait_us Time a response waited for its records to be on disk, microseconds.\n# TYPE ringleader_durable_wait_us summary\n");
    summary(
        &mut out,
        "ringleader_durable_wait_us",
        "",
        &m.durable_wait_us,
    );
    out.push_str("# HELP ringleader_fsync_us One journal round (one write plus one fdatasync for every partition in it), microseconds.\n# TYPE ringleader_fsync_us summary\n");
    summary(&mut out, "ringleader_fsync_us", "", &m.fsync_us);
    out.push_str("# HELP ringleader_batch_records Records per partition batch.\n# TYPE ringleader_batch_records summary\n");
    summary(&mut out, "ringleader_batch_records", "", &m.batch_records);
    out.push_str("# HELP ringleader_journal_round_batches Partition batches one journal round (one fdatasync) made durable.\n# TYPE ringleader_journal_round_batches summary\n");
    summary(
        &mut out,
        "ringleader_journal_round_batches",
        "",
        &m.journal_round_batches,
    );
    out.push_str("# HELP ringleader_compaction_slice_us One slice of a __consumer_offsets compaction pass, microseconds.\n# TYPE ringleader_compaction_slice_us summary\n");
    summary(
        &mut out,
        "ringleader_compaction_slice_us",
        "",
        &m.compaction_slice_us,
    );
    for (name, help, kind, v) in [
        (
            "ringleader_fsyncs_total",
            "Journal rounds written and synced (one fdatasync each).",
            "counter",
            m.fsyncs,
        ),
        (
            "ringleader_records_written_total",
            "Records written to __consumer_offsets.",
            "counter",
            m.records_written,
        ),
        (
            "ringleader_write_failures_total",
            "Failed batch writes.",
            "counter",
            m.write_failures,
        ),
        (
            "ringleader_compaction_passes_total",
            "Completed compaction passes over __consumer_offsets partitions.",
            "counter",
            m.compaction_passes,
        ),
        (
            "ringleader_compaction_bytes_removed_total",
            "Log bytes removed by compaction.",
            "counter",
            m.compaction_bytes_removed,
        ),
        (
            "ringleader_rebalances_total",
            "Completed classic join phases and consumer-group target assignments.",
            "counter",
            m.rebalances,
        ),
        (
            "ringleader_classic_groups",
            "Classic groups held.",
            "gauge",
            m.classic_groups,
        ),
        (
            "ringleader_consumer_groups",
            "Consumer-protocol groups held.",
            "gauge",
            m.consumer_groups,
        ),
        (
            "ringleader_members",
            "Group members held (both protocols).",
            "gauge",
            m.members,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    }
    out.push_str("# HELP ringleader_partition_load_ms Time to load a __consumer_offsets partition at start-up.\n# TYPE ringleader_partition_load_ms gauge\n");
    for (p, ms, records) in &m.loads {
        let _ = writeln!(
            out,
            "ringleader_partition_load_ms{{partition=\"{p}\",records=\"{records}\"}} {ms}"
        );
    }
    out
}

/// Serve `hub` as `GET /metrics` (any path answers the same) on `addr`, on its own thread with
/// blocking sockets: reads are rare and must never touch a shard's reactor.
pub fn serve(
    addr: std::net::SocketAddr,
    hub: Arc<MetricsHub>,
) -> std::io::Result<std::net::SocketAddr> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new().name("metrics".into()).spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let _ = s.set_write_timeout(Some(std::time::Duration::from_secs(2)));
            // Read the request head (bounded); the content does not matter.
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let body = hub.render();
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    })?;
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_merges_and_parses_back() {
        let hub = MetricsHub::new();
        let mut a = ShardMetrics::default();
        a.record_request(12, 0, 5, 40, 50);
        a.record_request(12, 27, 5, 90, 100);
        a.fsyncs = 3;
        a.members = 2;
        let mut b = ShardMetrics::default();
        b.record_request(12, 0, 5, 190, 200);
        b.fsyncs = 4;
        b.members = 5;
        hub.publish(0, a);
        hub.publish(1, b);
        let text = hub.render();
        let parsed = tools::stats::parse(&text);
        assert_eq!(
            parsed[&(
                "ringleader_request_total_us_count".to_string(),
                "api=\"Heartbeat\"".to_string()
            )],
            3.0
        );
        assert_eq!(
            parsed[&(
                "ringleader_requests_total".to_string(),
                "api=\"Heartbeat\",error=\"27\"".to_string()
            )],
            1.0
        );
        assert_eq!(
            parsed[&("ringleader_fsyncs_total".to_string(), String::new())],
            7.0
        );
        assert_eq!(
            parsed[&("ringleader_members".to_string(), String::new())],
            7.0
        );
        let max = parsed[&(
            "ringleader_request_total_us".to_string(),
            "api=\"Heartbeat\",quantile=\"1\"".to_string(),
        )];
        assert!((199.0..=201.0).contains(&max), "{max}");
    }

    #[test]
    fn the_endpoint_serves_and_stats_prints() {
        let hub = MetricsHub::new();
        let mut a = ShardMetrics::default();
        a.record_request(8, 0, 3, 300, 310);
        hub.publish(0, a);
        let addr = serve("127.0.0.1:0".parse().unwrap(), hub).unwrap();
        let mut out = Vec::new();
        tools::stats::print_stats(&addr.to_string(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("OffsetCommit"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("OffsetCommit") && l.split_whitespace().nth(1) == Some("1")),
            "{text}"
        );
    }
}
