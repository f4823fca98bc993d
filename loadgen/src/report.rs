//! Report output: the percentile table on stdout, `.hgrm` files, `summary.json`, `latency.svg`.

use crate::api::{error_name, Api, Versions};
use crate::assign::TopicInfo;
use crate::config::Args;
use crate::stats::{slot_name, Stats, CONVERGENCE};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// `.hgrm` values are written in milliseconds (histograms hold microseconds), the unit
/// HdrHistogram's plotters expect by default.
pub const HGRM_SCALING: f64 = 1000.0;
/// Percentile ticks per half distance, as in HdrHistogram's `outputPercentileDistribution`.
pub const HGRM_TICKS: u32 = 5;

/// The histogram slots reported for a run: the protocol's APIs, then anything else that was
/// used, then rebalance convergence (classic).
pub fn reported_slots(stats: &Stats, protocol_apis: &[Api]) -> Vec<usize> {
    let mut slots: Vec<usize> = protocol_apis.iter().map(|a| a.index()).collect();
    for a in Api::ALL {
        if !slots.contains(&a.index()) && stats.requests[a.index()] > 0 {
            slots.push(a.index());
        }
    }
    slots.push(CONVERGENCE);
    slots
}

/// Write a histogram in HdrHistogram's percentile-distribution text format (the layout of Java's
/// `outputPercentileDistribution` and of `.hgrm` files): a header, one line per percentile step
/// with the value (divided by `scaling`), percentile, cumulative count and 1/(1-percentile), then
/// mean/stddev, max/total and bucket footer lines.
pub fn write_hgrm(h: &Histogram<u64>, scaling: f64, out: &mut impl Write) -> io::Result<()> {
    let p = 3usize; // decimals: µs resolution when values are in ms
    writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(HGRM_TICKS) {
            total += v.count_since_last_iteration();
            let value = v.value_iterated_to() as f64 / scaling;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                writeln!(
                    out,
                    "{value:>12.p$} {q:>2.12} {total:>10} {:>14.2}",
                    1.0 / (1.0 - q)
                )?;
            } else {
                writeln!(out, "{value:>12.p$} {q:>2.12} {total:>10}")?;
            }
        }
    }
    let (mean, stdev, max) = if !h.is_empty() {
        (
            h.mean() / scaling,
            h.stdev() / scaling,
            h.max() as f64 / scaling,
        )
    } else {
        (0.0, 0.0, 0.0)
    };
    writeln!(
        out,
        "#[Mean    = {mean:>12.p$}, StdDeviation   = {stdev:>12.p$}]"
    )?;
    writeln!(
        out,
        "#[Max     = {max:>12.p$}, Total count    = {:>12}]",
        h.len()
    )?;
    writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        sub_bucket_count(h.sigfig())
    )?;
    Ok(())
}

/// HdrHistogram's sub-bucket count for a precision: 2^ceil(log2(2 × 10^sigfig)).
fn sub_bucket_count(sigfig: u8) -> u64 {
    let largest = 2 * 10u64.pow(u32::from(sigfig));
    largest.next_power_of_two()
}

/// Latency percentiles in µs, for JSON.
pub fn percentiles_json(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!({"count": 0});
    }
    json!({
        "count": h.len(),
        "min": h.min(),
        "mean": (h.mean() * 10.0).round() / 10.0,
        "p50": h.value_at_quantile(0.5),
        "p90": h.value_at_quantile(0.9),
        "p99": h.value_at_quantile(0.99),
        "p99_9": h.value_at_quantile(0.999),
        "p99_99": h.value_at_quantile(0.9999),
        "max": h.max(),
    })
}

/// Everything the final report needs besides the merged statistics.
#[derive(Debug)]
pub struct RunInfo<'a> {
    pub args: &'a Args,
    pub versions: &'a Versions,
    pub topics: &'a [TopicInfo],
    pub protocol_apis: &'a [Api],
    /// Length of the measured run (excluding the drain), seconds.
    pub duration_s: f64,
    /// Responses received during the measured run, per API (throughput numerator).
    pub window_responses: [u64; crate::api::API_COUNT],
    pub members_total: u64,
    pub stable_at_end: u64,
    pub ever_stable: u64,
    pub shared_conns: u64,
    pub pool_peak: u64,
    pub rate_late_slots: u64,
    pub rate_idle_slots: u64,
    pub started_unix_ms: u128,
    pub fatal: Vec<String>,
    /// Who owned which partition when the run ended (`run::Ownership`), if computed.
    pub ownership_at_end: Option<Value>,
    /// `--server-pid`: the broker's CPU and RSS (`procstat::ServerSampler::to_json`).
    pub server: Option<Value>,
    /// `--until-stable` / `--late-joiners`: `converge::report_json`.
    pub group_convergence: Option<Value>,
}

impl RunInfo<'_> {
    pub fn error_rate(&self, stats: &Stats) -> f64 {
        let req = stats.total_requests();
        if req == 0 {
            if stats.total_errors() > 0 {
                1.0
            } else {
                0.0
            }
        } else {
            stats.total_errors() as f64 / req as f64
        }
    }

    /// The verdict: no worker failed, some member reached a stable generation (a run where
    /// nobody ever did measured nothing), and errors stayed within `--max-error-rate`.
    pub fn passed(&self, stats: &Stats) -> bool {
        self.fatal.is_empty()
            && self.ever_stable > 0
            && stats.total_requests() > 0
            && self.error_rate(stats) <= self.args.max_error_rate
    }

    /// Heartbeat responses in the measured window, classic and KIP-848 together.
    fn heartbeat_responses(&self) -> u64 {
        self.window_responses[Api::Heartbeat.index()]
            + self.window_responses[Api::ConsumerGroupHeartbeat.index()]
    }

    fn per_s(&self, n: u64) -> f64 {
        if self.duration_s > 0.0 {
            (n as f64 / self.duration_s * 10.0).round() / 10.0
        } else {
            0.0
        }
    }
}

fn hgrm_file(slot: usize) -> String {
    if slot == CONVERGENCE {
        "rebalance.hgrm".to_string()
    } else {
        format!("{}.hgrm", Api::ALL[slot].file_stem())
    }
}

/// Build `summary.json`.
pub fn summary_json(info: &RunInfo, stats: &Stats) -> Value {
    let slots = reported_slots(stats, info.protocol_apis);
    let mut apis = Map::new();
    let mut errors_by = Map::new();
    let mut files = Map::new();
    for &slot in &slots {
        files.insert(slot_name(slot).to_string(), json!(hgrm_file(slot)));
        if slot == CONVERGENCE {
            continue;
        }
        let api = Api::ALL[slot];
        let codes: Map<String, Value> = stats
            .codes
            .iter()
            .filter(|((a, _), _)| *a == api)
            .map(|((_, c), n)| (error_name(*c), json!(n)))
            .collect();
        let errs: Map<String, Value> = stats
            .error_codes
            .iter()
            .filter(|((a, _), _)| *a == api)
            .map(|((_, c), n)| (error_name(*c), json!(n)))
            .collect();
        if !errs.is_empty() {
            errors_by.insert(api.name().to_string(), Value::Object(errs.clone()));
        }
        apis.insert(
            api.name().to_string(),
            json!({
                "version": info.versions.get(api),
                "requests": stats.requests[slot],
                "responses": stats.responses[slot],
                "errors": stats.errors[slot],
                "stale": stats.stale[slot],
                "per_s": info.per_s(info.window_responses[slot]),
                "codes": codes,
                "errors_by_code": errs,
                "latency_us": percentiles_json(&stats.hists[slot]),
            }),
        );
    }
    files.insert("plot".into(), json!("latency.svg"));
    let total_window: u64 = info.window_responses.iter().sum();
    json!({
        "tool": "ringleader-loadgen",
        "tool_version": env!("CARGO_PKG_VERSION"),
        "protocol": info.args.protocol,
        "config": info.args,
        "started_at_unix_ms": info.started_unix_ms as u64,
        "duration_s": (info.duration_s * 1000.0).round() / 1000.0,
        "api_versions": info.versions.table(),
        "topics": info.topics.iter().map(|t| json!({"name": t.name.as_str(), "partitions": t.partitions})).collect::<Vec<_>>(),
        "members": {
            "total": info.members_total,
            "stable_at_end": info.stable_at_end,
            "ever_stable": info.ever_stable,
        },
        "connections": {
            "shared": info.shared_conns,
            "rebalance_pool_peak": info.pool_peak,
        },
        "totals": {
            "requests": stats.total_requests(),
            "responses": stats.total_responses(),
            "errors": stats.total_errors(),
            "stale": stats.stale.iter().sum::<u64>(),
            "error_rate": info.error_rate(stats),
            "responses_per_s": info.per_s(total_window),
            "heartbeats_per_s": info.per_s(info.heartbeat_responses()),
        },
        "apis": apis,
        "rebalance_convergence_us": percentiles_json(&stats.hists[CONVERGENCE]),
        "errors_by_api_and_code": errors_by,
        "open_loop": info.args.rate.map(|r| json!({
            "rate_per_s": r,
            "late_slots": info.rate_late_slots,
            "idle_slots": info.rate_idle_slots,
        })),
        "latency_measured_from": if info.args.rate.is_some() { "intended send time (open loop, coordinated-omission corrected)" } else { "send time (closed loop)" },
        "hgrm_value_unit": "milliseconds",
        "files": files,
        "max_error_rate": info.args.max_error_rate,
        "fatal_errors": info.fatal,
        "passed": info.passed(stats),
        "ownership_at_end": info.ownership_at_end,
        "server": info.server,
        "group_convergence": info.group_convergence,
    })
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// The human-readable report for stdout.
pub fn text_table(info: &RunInfo, stats: &Stats) -> String {
    let mut s = String::new();
    let a = info.args;
    let total_window: u64 = info.window_responses.iter().sum();
    let _ = writeln!(
        s,
        "loadgen {}: {} members in {} groups, {:.1} s, {} shared connections (+{} join/sync peak), {} topics x {} partitions",
        a.protocol,
        info.members_total,
        a.groups,
        info.duration_s,
        info.shared_conns,
        info.pool_peak,
        info.topics.len(),
        info.topics.first().map(|t| t.partitions).unwrap_or(0),
    );
    if !a.warmup.is_zero() {
        let _ = writeln!(
            s,
            "latencies below leave out the first {} (warm-up) and the final leave storm; counts, errors and convergence cover the whole run",
            crate::config::format_duration(a.warmup)
        );
    }
    let _ = writeln!(
        s,
        "responses {} ({:.1}/s), heartbeats {:.1}/s, errors {} ({:.4}%), stable {}/{} at end ({} ever)",
        total_window,
        info.per_s(total_window),
        info.per_s(info.heartbeat_responses()),
        stats.total_errors(),
        info.error_rate(stats) * 100.0,
        info.stable_at_end,
        info.members_total,
        info.ever_stable,
    );
    if let Some(r) = a.rate {
        let _ = writeln!(
            s,
            "open loop at {r}/s: latency from intended send time; {} late slots, {} slots without a stable member",
            info.rate_late_slots, info.rate_idle_slots
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<24} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "API (latency in ms)", "count", "errors", "p50", "p90", "p99", "p99.9", "max"
    );
    for slot in reported_slots(stats, info.protocol_apis) {
        let h = &stats.hists[slot];
        let name = if slot == CONVERGENCE {
            "Rebalance (join→stable)".to_string()
        } else {
            slot_name(slot).to_string()
        };
        let errors = if slot == CONVERGENCE {
            "-".to_string()
        } else {
            stats.errors[slot].to_string()
        };
        if h.is_empty() {
            let _ = writeln!(s, "{name:<24} {:>10} {errors:>8}", 0);
            continue;
        }
        let _ = writeln!(
            s,
            "{name:<24} {:>10} {errors:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            h.len(),
            ms(h.value_at_quantile(0.5)),
            ms(h.value_at_quantile(0.9)),
            ms(h.value_at_quantile(0.99)),
            ms(h.value_at_quantile(0.999)),
            ms(h.max()),
        );
    }
    if !stats.error_codes.is_empty() {
        let _ = writeln!(s, "\nerrors by API and code:");
        for ((api, code), n) in &stats.error_codes {
            let _ = writeln!(s, "  {:<16} {:<36} {n}", api.name(), error_name(*code));
        }
    }
    if let Some(v) = &info.server {
        let f = |k: &str| v[k].as_f64().map_or("-".to_string(), |x| format!("{x}"));
        let _ = writeln!(
            s,
            "\nbroker (pid {}): {} cores over the steady window; RSS {} MB at the end of the run, max {} MB steady, {} MB with the leave storm",
            v["pid"],
            f("cpu_cores_steady"),
            f("rss_mb_at_end_of_run"),
            f("rss_mb_max_steady"),
            f("rss_mb_max_incl_drain"),
        );
    }
    if let Some(v) = &info.group_convergence {
        let _ = writeln!(s, "\n{}", convergence_lines(v));
    }
    for f in &info.fatal {
        let _ = writeln!(s, "fatal: {f}");
    }
    s
}

/// The group convergence report (`converge::report_json`) as text.
fn convergence_lines(v: &Value) -> String {
    let mut s = String::new();
    let pct = |p: &Value| {
        if p["count"].as_u64().unwrap_or(0) == 0 {
            return "none".to_string();
        }
        let g = |k: &str| p[k].as_u64().map_or("-".to_string(), ms);
        format!(
            "n {} p50 {} p99 {} max {} ms",
            p["count"],
            g("p50"),
            g("p99"),
            g("max")
        )
    };
    let _ = writeln!(
        s,
        "group convergence (every member stable, every partition owned, balanced to within one):"
    );
    match v["initial_converged_ms"].as_f64() {
        Some(t) => {
            let _ = writeln!(s, "  start-up: all groups converged at {t} ms");
        }
        None => {
            let _ = writeln!(s, "  start-up: the groups did not converge within the run");
        }
    }
    let i = &v["initial"];
    if i.is_object() {
        let _ = writeln!(
            s,
            "  per member, join → stable with its final assignment: {} ({} of {} groups converged at the end)",
            pct(&i["per_member_join_to_stable_us"]),
            i["groups_converged_at_end"],
            i["groups"]
        );
    }
    let l = &v["late_joiners"];
    if l["requested"].as_u64().unwrap_or(0) > 0 {
        let _ = writeln!(
            s,
            "  late joiners {}/{}: joiner join → stable {}; join → group converged {}",
            l["completed"],
            l["requested"],
            pct(&l["joiner_join_to_stable_us"]),
            pct(&l["join_to_group_converged_us"])
        );
    }
    s
}

/// Write every report file into `dir`; returns the paths written.
pub fn write_files(dir: &Path, info: &RunInfo, stats: &Stats) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let slots = reported_slots(stats, info.protocol_apis);
    for &slot in &slots {
        let path = dir.join(hgrm_file(slot));
        let mut f = io::BufWriter::new(std::fs::File::create(&path)?);
        write_hgrm(&stats.hists[slot], HGRM_SCALING, &mut f)?;
        f.flush()?;
        written.push(path);
    }
    let path = dir.join("summary.json");
    let text =
        serde_json::to_string_pretty(&summary_json(info, stats)).map_err(io::Error::other)?;
    std::fs::write(&path, text + "\n")?;
    written.push(path);
    let series: Vec<(&str, &Histogram<u64>)> = slots
        .iter()
        .map(|&s| (slot_name(s), &stats.hists[s]))
        .collect();
    let title = format!(
        "loadgen {}: {} members, {} groups, {:.0} s",
        info.args.protocol, info.members_total, info.args.groups, info.duration_s
    );
    let path = dir.join("latency.svg");
    std::fs::write(&path, latency_svg(&title, &series))?;
    written.push(path);
    Ok(written)
}

const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

/// A percentile plot: x = percentile on a log "nines" scale (0, 90, 99, 99.9, ...), y = latency
/// on a log scale, one line per series. Self-contained SVG, no scripts.
pub fn latency_svg(title: &str, series: &[(&str, &Histogram<u64>)]) -> String {
    let (w, h) = (960.0f64, 560.0f64);
    let (left, right, top, bottom) = (80.0, 210.0, 50.0, 60.0);
    let pw = w - left - right;
    let ph = h - top - bottom;

    // Points per series: (nines, latency µs).
    let mut lines: Vec<(&str, Vec<(f64, f64)>)> = Vec::new();
    let mut max_nines = 2.0f64;
    let (mut y_lo, mut y_hi) = (f64::MAX, f64::MIN);
    for (name, hist) in series {
        if hist.is_empty() {
            continue;
        }
        let count = hist.len() as f64;
        let top_nines = count.log10().max(0.0);
        let mut pts = Vec::new();
        for v in hist.iter_quantiles(HGRM_TICKS) {
            let q = v.quantile_iterated_to();
            let x = if q >= 1.0 {
                top_nines
            } else {
                nines(q).min(top_nines)
            };
            let y = (v.value_iterated_to().max(1)) as f64;
            pts.push((x, y));
        }
        if pts.is_empty() {
            continue;
        }
        max_nines = max_nines.max(top_nines);
        for &(_, y) in &pts {
            y_lo = y_lo.min(y);
            y_hi = y_hi.max(y);
        }
        lines.push((name, pts));
    }
    let max_x = max_nines.ceil().clamp(3.0, 7.0);
    if lines.is_empty() {
        y_lo = 1.0;
        y_hi = 1000.0;
    }
    let y_min = 10f64.powf(y_lo.max(1.0).log10().floor());
    let mut y_max = 10f64.powf(y_hi.max(1.0).log10().ceil());
    if y_max <= y_min {
        y_max = y_min * 10.0;
    }
    let sx = |x: f64| left + x.min(max_x) / max_x * pw;
    let sy = |y: f64| {
        top + ph - (y.max(y_min).log10() - y_min.log10()) / (y_max.log10() - y_min.log10()) * ph
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="28" font-size="16" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        xml_escape(title)
    );
    // Grid and axes.
    for i in 0..=(max_x as usize) {
        let x = sx(i as f64);
        let label = match i {
            0 => "0%".to_string(),
            1 => "90%".to_string(),
            n => format!("99.{}%", "9".repeat(n - 2)).replace("99.%", "99%"),
        };
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            top + ph,
            top + ph + 18.0
        );
    }
    let mut y = y_min;
    while y <= y_max * 1.0001 {
        let py = sy(y);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + pw,
            left - 6.0,
            py + 4.0,
            fmt_us(y)
        );
        y *= 10.0;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        left + pw / 2.0,
        h - 16.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">latency</text>"#,
        top + ph / 2.0,
        top + ph / 2.0
    );
    // Lines and legend.
    for (i, (name, pts)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let dash = if *name == slot_name(CONVERGENCE) {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let mut d = String::new();
        for (j, &(x, y)) in pts.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if j == 0 { "M" } else { "L" },
                sx(x),
                sy(y)
            );
        }
        let _ = writeln!(
            s,
            r#"<path d="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
            d.trim_end()
        );
        let ly = top + 10.0 + i as f64 * 20.0;
        let lx = left + pw + 16.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"{dash}/><text x="{}" y="{}">{}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0,
            xml_escape(name)
        );
    }
    if lines.is_empty() {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">no samples</text>"#,
            left + pw / 2.0,
            top + ph / 2.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Percentile → "nines": 0.9 → 1, 0.99 → 2, ...
fn nines(q: f64) -> f64 {
    if q <= 0.0 {
        0.0
    } else {
        -(1.0 - q).log10()
    }
}

fn fmt_us(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{}s", us / 1_000_000.0)
    } else if us >= 1000.0 {
        format!("{}ms", us / 1000.0)
    } else {
        format!("{us}µs")
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;
    use clap::Parser;
    use kafka_protocol::ResponseError;

    fn sample() -> Histogram<u64> {
        let mut h = new_histogram();
        for v in 1..=10_000u64 {
            h.record(v * 10).unwrap(); // 10 µs .. 100 ms
        }
        h
    }

    #[test]
    fn hgrm_has_the_standard_layout() {
        let h = sample();
        let mut buf = Vec::new();
        write_hgrm(&h, HGRM_SCALING, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "       Value     Percentile TotalCount 1/(1-Percentile)"
        );
        assert_eq!(lines[1], "");
        // First data line: the smallest value at percentile 0, count 1.
        let first: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(first, vec!["0.010", "0.000000000000", "1", "1.00"]);
        // The 100% line has no 1/(1-p) column and the full count.
        let last_data = lines.iter().rev().find(|l| !l.starts_with('#')).unwrap();
        let cols: Vec<&str> = last_data.split_whitespace().collect();
        assert_eq!(cols.len(), 3);
        assert_eq!(cols[1], "1.000000000000");
        assert_eq!(cols[2], "10000");
        // Percentiles and counts never go down.
        let mut prev = (0f64, 0u64);
        for l in &lines[2..] {
            if l.starts_with('#') {
                continue;
            }
            let c: Vec<&str> = l.split_whitespace().collect();
            let (q, n): (f64, u64) = (c[1].parse().unwrap(), c[2].parse().unwrap());
            assert!(q >= prev.0 && n >= prev.1, "{l}");
            prev = (q, n);
        }
        assert!(text.contains("#[Mean    =       50.0"), "{text}");
        assert!(text.contains("Total count    =        10000]"));
        assert!(text.contains("SubBuckets     =         2048]"));
        // A p50 line near 50 ms exists.
        assert!(lines.iter().any(|l| l.contains(" 0.500000000000 ")));
    }

    #[test]
    fn empty_histogram_still_writes_header_and_footer() {
        let mut buf = Vec::new();
        write_hgrm(&new_histogram(), HGRM_SCALING, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("       Value"));
        assert!(text.contains("Total count    =            0]"));
    }

    #[test]
    fn summary_has_the_promised_fields_and_files_appear() {
        let args = Args::parse_from(["loadgen", "--groups", "2", "--members-per-group", "3"]);
        let versions = Versions::max_implemented();
        let mut stats = Stats::default();
        stats.requests[Api::Heartbeat.index()] = 100;
        stats.responses[Api::Heartbeat.index()] = 100;
        for _ in 0..100 {
            stats.record_latency(Api::Heartbeat, 250);
        }
        stats.code(Api::Heartbeat, ResponseError::RebalanceInProgress.code());
        stats.requests[Api::JoinGroup.index()] = 12;
        stats.code(
            Api::JoinGroup,
            ResponseError::CoordinatorNotAvailable.code(),
        );
        stats.error(
            Api::JoinGroup,
            ResponseError::CoordinatorNotAvailable.code(),
        );
        stats.record_convergence(40_000);
        let topics = vec![TopicInfo {
            name: "loadgen-t0".to_string().into(),
            partitions: 4,
            id: uuid::Uuid::nil(),
        }];
        let mut window = [0u64; crate::api::API_COUNT];
        window[Api::Heartbeat.index()] = 100;
        let info = RunInfo {
            args: &args,
            versions: &versions,
            topics: &topics,
            protocol_apis: &crate::CLASSIC_APIS,
            duration_s: 10.0,
            window_responses: window,
            members_total: 6,
            stable_at_end: 6,
            ever_stable: 6,
            shared_conns: 6,
            pool_peak: 6,
            rate_late_slots: 0,
            rate_idle_slots: 0,
            started_unix_ms: 1,
            fatal: vec![],
            ownership_at_end: None,
            server: None,
            group_convergence: None,
        };
        let v = summary_json(&info, &stats);
        assert_eq!(v["protocol"], "classic");
        assert_eq!(v["totals"]["requests"], 112);
        assert_eq!(v["totals"]["errors"], 1);
        assert_eq!(v["totals"]["heartbeats_per_s"], 10.0);
        assert_eq!(v["apis"]["Heartbeat"]["latency_us"]["p50"], 250);
        assert_eq!(
            v["apis"]["Heartbeat"]["codes"]["REBALANCE_IN_PROGRESS(27)"],
            1
        );
        assert_eq!(v["apis"]["Heartbeat"]["errors"], 0);
        assert_eq!(
            v["errors_by_api_and_code"]["JoinGroup"]["COORDINATOR_NOT_AVAILABLE(15)"],
            1
        );
        assert_eq!(v["rebalance_convergence_us"]["count"], 1);
        assert_eq!(v["members"]["stable_at_end"], 6);
        assert_eq!(v["config"]["groups"], 2);
        assert_eq!(v["config"]["duration"], "30s");
        assert_eq!(v["api_versions"]["JoinGroup"], 9);
        assert_eq!(v["passed"], true); // 1/112 < 1%
        assert!(v["apis"]["OffsetFetch"].is_object()); // every protocol API is listed

        let dir = std::env::temp_dir().join(format!("loadgen-report-test-{}", std::process::id()));
        let written = write_files(&dir, &info, &stats).unwrap();
        for f in [
            "heartbeat.hgrm",
            "joingroup.hgrm",
            "rebalance.hgrm",
            "summary.json",
            "latency.svg",
        ] {
            assert!(dir.join(f).exists(), "{f}");
        }
        assert_eq!(written.len(), crate::CLASSIC_APIS.len() + 3);
        let svg = std::fs::read_to_string(dir.join("latency.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("Heartbeat") && svg.contains("99.9%"));
        let table = text_table(&info, &stats);
        assert!(table.contains("Heartbeat") && table.contains("Rebalance (join→stable)"));
        std::fs::remove_dir_all(&dir).unwrap();

        // Nobody ever stable: a failed run even without errors.
        let nobody = RunInfo {
            ever_stable: 0,
            stable_at_end: 0,
            ..info
        };
        assert!(!nobody.passed(&stats));
        // Errors above the threshold fail it too.
        stats.error(Api::Heartbeat, ResponseError::UnknownMemberId.code());
        stats.error(Api::Heartbeat, ResponseError::UnknownMemberId.code());
        let again = RunInfo {
            ever_stable: 6,
            ..nobody
        };
        assert!(!again.passed(&stats)); // 3 / 112 > 1%
    }

    #[test]
    fn nines_scale() {
        assert_eq!(nines(0.0), 0.0);
        assert!((nines(0.9) - 1.0).abs() < 1e-9);
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(sub_bucket_count(3), 2048);
        assert_eq!(sub_bucket_count(2), 256);
    }
}
