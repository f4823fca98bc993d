//! The one place a panic is contained: decoding bytes a peer sent.
//!
//! The generated decoders can panic on a hostile frame ("capacity overflow" for a lying array
//! length); such a panic costs the frame, never the process. Every other panic in the broker is a
//! bug that must stop the process (the binary's panic hook exits when a panic happens outside
//! [`contain`]), because a shard that died while the others go on leaves every call into it
//! hanging.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Run `f`, turning a panic inside it into `Err`. Only for decoding what a peer sent.
pub fn contain<T>(f: impl FnOnce() -> T) -> Result<T, Box<dyn Any + Send>> {
    DEPTH.with(|d| d.set(d.get() + 1));
    let result = catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    result
}

/// Whether the current thread is inside [`contain`] (the panic hook lets such a panic unwind).
pub fn contained() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_is_an_error_and_the_depth_comes_back() {
        assert!(!contained());
        let r: Result<(), _> = contain(|| {
            assert!(contained());
            panic!("hostile frame")
        });
        assert!(r.is_err());
        assert!(!contained());
        assert_eq!(contain(|| 7).ok(), Some(7));
    }
}
