//! A `timerfd` armed at absolute CLOCK_MONOTONIC deadlines. `epoll_wait` only takes whole
//! milliseconds, so a loop that sleeps in it fires its timers in 1 ms clumps: a thousand members
//! with evenly spread heartbeats would reach the broker in bursts. Waking on a timerfd instead
//! keeps each timer within microseconds of its deadline without spinning.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

#[derive(Debug)]
pub struct PreciseTimer {
    fd: OwnedFd,
    /// CLOCK_MONOTONIC at the loop's time zero, in nanoseconds.
    base_ns: i128,
    armed_at_us: Option<u64>,
}

fn monotonic_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

impl PreciseTimer {
    pub fn new() -> io::Result<Self> {
        // SAFETY: timerfd_create has no pointer arguments; the result is checked below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PreciseTimer {
            // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            base_ns: monotonic_ns(),
            armed_at_us: None,
        })
    }

    /// Make "now" time zero (call right after taking the loop's `Instant` zero; both read
    /// CLOCK_MONOTONIC on Linux).
    pub fn reset_base(&mut self) {
        self.base_ns = monotonic_ns();
        self.armed_at_us = None;
    }

    /// Fire at `at_us` after time zero (immediately if that has passed). Re-arming at the same
    /// deadline costs nothing.
    pub fn arm(&mut self, at_us: u64) -> io::Result<()> {
        if self.armed_at_us == Some(at_us) {
            return Ok(());
        }
        let ns = (self.base_ns + at_us as i128 * 1000).max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: the fd is ours and open; `spec` lives across the call; old value not wanted.
        let r = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed_at_us = Some(at_us);
        Ok(())
    }

    /// Consume an expiry (after its readiness event) so the next one is reported again.
    pub fn acknowledge(&mut self) {
        let mut buf = [0u8; 8];
        // SAFETY: reading at most 8 bytes into a buffer of 8; the fd is non-blocking.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        self.armed_at_us = None;
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn fires_at_an_absolute_deadline() {
        let mut t = PreciseTimer::new().unwrap();
        let start = Instant::now();
        t.reset_base();
        t.arm(3_000).unwrap();
        let mut pfd = libc::pollfd {
            fd: t.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, 1 s timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 1000) };
        assert_eq!(n, 1);
        let waited = start.elapsed();
        assert!(waited >= Duration::from_micros(2_900), "{waited:?}");
        assert!(waited < Duration::from_millis(500), "{waited:?}");
        t.acknowledge();
        // A deadline in the past fires at once.
        t.arm(0).unwrap();
        // SAFETY: as above.
        let n = unsafe { libc::poll(&mut pfd, 1, 1000) };
        assert_eq!(n, 1);
    }
}
