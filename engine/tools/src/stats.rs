//! `ringleader stats ADDR`: read a broker's Prometheus endpoint (`--metrics-listen`) and print
//! the latency and counter tables a person can read. A client of the endpoint only; the metrics
//! themselves are the broker's (`engine::metrics`).

use std::collections::BTreeMap;

/// `ringleader stats ADDR`: fetch the endpoint and print tables a person can read.
pub fn print_stats(addr: &str, out: &mut dyn std::io::Write) -> Result<(), String> {
    use std::io::{Read, Write};
    let sock: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| format!("bad address {addr}: {e}"))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, std::time::Duration::from_secs(5))
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: ringleader\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.take(64 << 20)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or(&text);
    let parsed = parse(body);
    let get = |name: &str, labels: &str| {
        parsed
            .get(&(name.to_string(), labels.to_string()))
            .copied()
            .unwrap_or(0.0)
    };
    let mut apis: Vec<String> = parsed
        .keys()
        .filter(|(n, _)| n == "ringleader_request_total_us_count")
        .map(|(_, l)| l.clone())
        .collect();
    apis.sort();
    let w = |out: &mut dyn std::io::Write, s: String| {
        out.write_all(s.as_bytes()).map_err(|e| e.to_string())
    };
    w(
        out,
        format!(
            "{:<24} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            "API (total, µs)", "COUNT", "P50", "P90", "P99", "P99.9", "MAX"
        ),
    )?;
    for labels in &apis {
        let name = labels.trim_start_matches("api=\"").trim_end_matches('"');
        let q = |x: &str| {
            get(
                "ringleader_request_total_us",
                &format!("{labels},quantile=\"{x}\""),
            )
        };
        w(
            out,
            format!(
                "{:<24} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
                name,
                get("ringleader_request_total_us_count", labels),
                q("0.5"),
                q("0.9"),
                q("0.99"),
                q("0.999"),
                q("1")
            ),
        )?;
    }
    let q = |n: &str, x: &str| get(n, &format!("quantile=\"{x}\""));
    w(out, format!(
        "\nfsyncs {}  records written {}  write failures {}\nfsync µs p50 {} p99 {} max {}   records/batch p50 {} p99 {} max {}\ndurable wait µs p50 {} p99 {} max {}\nclassic groups {}  consumer groups {}  members {}  rebalances {}\n",
        get("ringleader_fsyncs_total", ""),
        get("ringleader_records_written_total", ""),
        get("ringleader_write_failures_total", ""),
        q("ringleader_fsync_us", "0.5"),
        q("ringleader_fsync_us", "0.99"),
        q("ringleader_fsync_us", "1"),
        q("ringleader_batch_records", "0.5"),
        q("ringleader_batch_records", "0.99"),
        q("ringleader_batch_records", "1"),
        q("ringleader_durable_wait_us", "0.5"),
        q("ringleader_durable_wait_us", "0.99"),
        q("ringleader_durable_wait_us", "1"),
        get("ringleader_classic_groups", ""),
        get("ringleader_consumer_groups", ""),
        get("ringleader_members", ""),
        get("ringleader_rebalances_total", ""),
    ))?;
    Ok(())
}

/// (metric name, labels without braces) → value, for the lines `print_stats` reads.
pub fn parse(body: &str) -> BTreeMap<(String, String), f64> {
    let mut m = BTreeMap::new();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match key.split_once('{') {
            Some((n, rest)) => (n.to_string(), rest.trim_end_matches('}').to_string()),
            None => (key.to_string(), String::new()),
        };
        m.insert((name, labels), v);
    }
    m
}
