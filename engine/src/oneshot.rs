//! A single-threaded one-shot slot: a value lands once and wakes the one task waiting for it.
//! Used where a response is produced by someone other than the task that waits for it (a reply
//! crossing the shard mesh, a JoinGroup answered when the join phase ends); [`Notify`] wakes a
//! set of such waiters at once.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

pub struct OneShot<T> {
    value: RefCell<Option<T>>,
    waker: RefCell<Option<Waker>>,
}

impl<T> Default for OneShot<T> {
    fn default() -> Self {
        Self {
            value: RefCell::new(None),
            waker: RefCell::new(None),
        }
    }
}

impl<T> OneShot<T> {
    pub fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }

    pub fn complete(&self, v: T) {
        *self.value.borrow_mut() = Some(v);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    pub fn wait(self: Rc<Self>) -> Wait<T> {
        Wait(self)
    }
}

pub struct Wait<T>(Rc<OneShot<T>>);

impl<T> Future for Wait<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if let Some(v) = self.0.value.borrow_mut().take() {
            return Poll::Ready(v);
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A set of waiters woken together (a partition's "high watermark moved", "write the pending
/// records"). Holds them weakly: a waiter that gave up (timed out, its request dropped) is gone
/// from the list at the next registration, so the list is bounded by live waiters.
#[derive(Default)]
pub struct Notify {
    waiters: RefCell<Vec<Weak<OneShot<()>>>>,
}

impl Notify {
    pub fn register(&self) -> Rc<OneShot<()>> {
        let w = OneShot::new();
        let mut ws = self.waiters.borrow_mut();
        ws.retain(|w| w.strong_count() > 0);
        ws.push(Rc::downgrade(&w));
        w
    }

    pub fn notify_all(&self) {
        let ws = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in ws {
            if let Some(w) = w.upgrade() {
                w.complete(());
            }
        }
    }
}
