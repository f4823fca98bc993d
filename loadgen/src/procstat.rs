//! `--server-pid`: the broker's CPU time and resident memory, read from `/proc` once a second by
//! the main thread, so a run reports what the load cost the broker next to the latency it saw.
//!
//! CPU is utime + stime of the whole process (every thread: a JVM's GC and JIT threads count);
//! memory is VmRSS. The steady window is the same as the latency tables': from the end of
//! `--warmup` to the end of the measured run (the final leave storm is left out).

use serde_json::{json, Value};
use std::time::Duration;

/// utime + stime of a process, seconds.
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5), 11 and 12 after the state field.
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (hz > 0.0).then(|| ticks / hz)
}

/// VmRSS of a process, bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Samples of one process over a run.
#[derive(Debug, Clone)]
pub struct ServerSampler {
    pid: u32,
    warmup: Duration,
    rss_at_start: Option<u64>,
    rss_max: u64,
    rss_max_steady: u64,
    rss_sum_steady: f64,
    rss_n_steady: u64,
    /// (elapsed, cpu seconds) at the first sample at or after the warm-up.
    cpu_from: Option<(Duration, f64)>,
    /// The same at the end of the measured run.
    cpu_to: Option<(Duration, f64)>,
    rss_at_end: Option<u64>,
    lost: bool,
}

impl ServerSampler {
    pub fn new(pid: u32, warmup: Duration) -> Self {
        ServerSampler {
            pid,
            warmup,
            rss_at_start: rss_bytes(pid),
            rss_max: 0,
            rss_max_steady: 0,
            rss_sum_steady: 0.0,
            rss_n_steady: 0,
            cpu_from: None,
            cpu_to: None,
            rss_at_end: None,
            lost: false,
        }
    }

    /// A sample during the measured run (`elapsed` since it started).
    pub fn sample(&mut self, elapsed: Duration) {
        let Some(rss) = rss_bytes(self.pid) else {
            self.lost = true;
            return;
        };
        self.rss_max = self.rss_max.max(rss);
        if elapsed >= self.warmup {
            if self.cpu_from.is_none() {
                if let Some(c) = cpu_secs(self.pid) {
                    self.cpu_from = Some((elapsed, c));
                }
            }
            self.rss_max_steady = self.rss_max_steady.max(rss);
            self.rss_sum_steady += rss as f64;
            self.rss_n_steady += 1;
        }
    }

    /// The measured run is over (before the members leave).
    pub fn end(&mut self, elapsed: Duration) {
        self.rss_at_end = rss_bytes(self.pid);
        if let Some(r) = self.rss_at_end {
            self.rss_max = self.rss_max.max(r);
        }
        if let Some(c) = cpu_secs(self.pid) {
            self.cpu_to = Some((elapsed, c));
        }
    }

    /// A sample during the drain (the leave storm): only the peak is kept.
    pub fn drain_sample(&mut self) {
        if let Some(r) = rss_bytes(self.pid) {
            self.rss_max = self.rss_max.max(r);
        }
    }

    pub fn to_json(&self) -> Value {
        let mb = |b: u64| (b as f64 / 1e5).round() / 10.0;
        let cpu = match (self.cpu_from, self.cpu_to) {
            (Some((t0, c0)), Some((t1, c1))) if t1 > t0 => {
                Some(((c1 - c0) / (t1 - t0).as_secs_f64() * 1000.0).round() / 1000.0)
            }
            _ => None,
        };
        json!({
            "pid": self.pid,
            "cpu_cores_steady": cpu,
            "cpu_window_s": match (self.cpu_from, self.cpu_to) {
                (Some((t0, _)), Some((t1, _))) => Some((t1.saturating_sub(t0)).as_secs_f64()),
                _ => None,
            },
            "rss_mb_at_start": self.rss_at_start.map(mb),
            "rss_mb_at_end_of_run": self.rss_at_end.map(mb),
            "rss_mb_max_steady": (self.rss_n_steady > 0).then(|| mb(self.rss_max_steady)),
            "rss_mb_mean_steady": (self.rss_n_steady > 0)
                .then(|| mb((self.rss_sum_steady / self.rss_n_steady as f64) as u64)),
            "rss_mb_max_incl_drain": mb(self.rss_max),
            "process_gone": self.lost,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(rss_bytes(me).unwrap() > 0);
        let c0 = cpu_secs(me).unwrap();
        // Burn a little CPU so the counter moves (it ticks at 100 Hz).
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        assert!(cpu_secs(me).unwrap() >= c0);
        assert!(rss_bytes(u32::MAX).is_none());
    }

    #[test]
    fn the_cpu_window_is_the_steady_part() {
        let me = std::process::id();
        let mut s = ServerSampler::new(me, Duration::from_secs(1));
        s.sample(Duration::from_millis(500));
        assert!(s.cpu_from.is_none(), "still in the warm-up");
        s.sample(Duration::from_millis(1200));
        s.end(Duration::from_millis(2200));
        let v = s.to_json();
        assert!(v["cpu_cores_steady"].as_f64().is_some());
        assert_eq!(v["cpu_window_s"].as_f64().unwrap(), 1.0);
        assert!(v["rss_mb_max_steady"].as_f64().unwrap() > 0.0);
    }
}
