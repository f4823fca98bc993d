//! The one shutdown token, and the registry of a shard's background tasks.
//!
//! [`Shutdown`] is shared by every shard (SIGINT/SIGTERM sets it through `ServerHandle`). Each
//! shard's accept loop notices it and stops that shard's [`Tasks`]: every periodic task (group
//! deadlines, retention, idle sweep, metrics) wakes at once from its sleep, sees the stop and
//! ends, and the shard waits for all of them before it exits — no task outlives its shard, and
//! none is left sleeping through a five-minute retention interval at shutdown.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Set once, read by every shard.
#[derive(Clone, Default, Debug)]
pub struct Shutdown(Arc<AtomicBool>);

impl Shutdown {
    pub fn trigger(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_triggered(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// The flag itself, for a signal handler (`signal_hook::flag`) to set.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

/// A shard's background tasks and its local stop signal.
#[derive(Default)]
pub struct Tasks {
    stopped: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
    running: RefCell<Vec<(&'static str, glommio::Task<()>)>>,
}

impl Tasks {
    pub fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }

    /// Run `step` every `period` until the shard stops (the first run is after one period).
    pub fn every<F, Fut>(self: &Rc<Self>, name: &'static str, period: Duration, mut step: F)
    where
        F: FnMut() -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let me = self.clone();
        let task = glommio::spawn_local(async move {
            loop {
                futures_lite::future::or(glommio::timer::sleep(period), me.stopped()).await;
                if me.stopped.get() {
                    break;
                }
                step().await;
            }
        });
        self.running.borrow_mut().push((name, task));
    }

    /// Run `work` once, as a registered task (it should watch [`Tasks::stopped`] if it is long).
    pub fn spawn(&self, name: &'static str, work: impl Future<Output = ()> + 'static) {
        self.running
            .borrow_mut()
            .push((name, glommio::spawn_local(work)));
    }

    /// Resolves once [`Tasks::stop`] was called.
    pub fn stopped(&self) -> Stopped<'_> {
        Stopped(self)
    }

    /// Wake every task that waits on [`Tasks::stopped`].
    pub fn stop(&self) {
        self.stopped.set(true);
        for w in self.wakers.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Stop, then wait for every registered task to end.
    pub async fn join(&self) {
        self.stop();
        let running = std::mem::take(&mut *self.running.borrow_mut());
        for (name, task) in running {
            task.await;
            tracing::trace!(task = name, "task ended");
        }
    }
}

pub struct Stopped<'a>(&'a Tasks);

impl Future for Stopped<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.stopped.get() {
            return Poll::Ready(());
        }
        let mut wakers = self.0.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
