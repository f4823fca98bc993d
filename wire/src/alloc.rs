//! An allocator wrapper that keeps a lying array length from killing the process.
//!
//! The `kafka-protocol` decoders call `Vec::with_capacity(n)` with `n` read straight off the wire
//! (up to 2^31 or 2^32 elements) before checking that the bytes exist. With a struct element of a
//! hundred bytes that is a request for hundreds of GiB; the kernel's overcommit heuristic refuses
//! it, the allocator returns null and Rust aborts. Such a decode fails a few bytes later anyway
//! (the body is far too short), so the memory is never touched. This wrapper serves every
//! allocation of `LARGE_ALLOC_BYTES` or more with an anonymous `MAP_NORESERVE` mapping: the kernel
//! does not count it against overcommit, no page is committed until written, and the decode error
//! that follows frees it. Everything smaller goes to the wrapped allocator unchanged.
//!
//! Binaries (server, loadgen, fuzz targets, tests) install it as `GuardedAlloc<mimalloc::MiMalloc>`.

use std::alloc::{GlobalAlloc, Layout};

/// Allocations at or above this size are mapped lazily. No legitimate allocation in Ringleader is
/// this large (frames are bounded by `socket.request.max.bytes`, 100 MiB by default).
pub const LARGE_ALLOC_BYTES: usize = 1 << 30;

const PAGE: usize = 4096;

#[derive(Debug, Default)]
pub struct GuardedAlloc<A>(pub A);

impl<A> GuardedAlloc<A> {
    fn is_large(layout: &Layout) -> bool {
        layout.size() >= LARGE_ALLOC_BYTES && layout.align() <= PAGE
    }

    fn map(size: usize) -> *mut u8 {
        // SAFETY: an anonymous private mapping with no address hint has no preconditions; the
        // result is checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }
}

// SAFETY: every block is either from the inner allocator (small layouts, forwarded unchanged) or
// from mmap (large layouts); `dealloc`/`realloc` route by the same size rule that `alloc` used, so
// a block is always returned to the allocator that produced it. Mappings are page aligned, which
// satisfies any layout with align <= PAGE (larger alignments go to the inner allocator).
unsafe impl<A: GlobalAlloc> GlobalAlloc for GuardedAlloc<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::is_large(&layout) {
            Self::map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's guarantees (non-zero size layout).
            unsafe { self.0.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::is_large(&layout) {
            Self::map(layout.size()) // anonymous mappings are zero-filled
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { self.0.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if Self::is_large(&layout) {
            // SAFETY: `ptr` came from `map(layout.size())` by the routing rule above.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            // SAFETY: `ptr` came from the inner allocator with this layout.
            unsafe { self.0.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees new_size > 0 and a valid layout at the old alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !Self::is_large(&layout) && !Self::is_large(&new_layout) {
            // SAFETY: both sides belong to the inner allocator.
            return unsafe { self.0.realloc(ptr, layout, new_size) };
        }
        // Crossing the threshold (or staying above it): allocate, copy, free, each routed.
        // SAFETY: new_layout is valid (same align, non-zero size).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for min(old, new) bytes and do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_huge_unused_vec_is_fine() {
        // 512 GiB of address space, never touched: refused by overcommit without the guard.
        let v: Vec<[u8; 256]> = Vec::with_capacity(1 << 31);
        assert!(v.capacity() >= 1 << 31);
        drop(v);
        let mut small: Vec<u64> = Vec::with_capacity(4);
        small.extend([1, 2, 3, 4, 5]);
        assert_eq!(small.iter().sum::<u64>(), 15);
    }
}
