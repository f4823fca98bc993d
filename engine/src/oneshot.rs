//! A single-threaded one-shot slot: a value lands once and wakes the one task waiting for it.
//! Used where a response is produced by someone other than the task that waits for it (a reply
//! crossing the shard mesh, a JoinGroup answered when the join phase ends).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
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
