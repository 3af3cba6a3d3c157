//! The module's global allocator: memory the machine refuses ends the process with the CLI's line
//! (`on_out_of_memory`) instead of Rust's abort. FFI glue: each `unsafe` says why it is sound.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::prelude::*;

/// A refused allocation ends the process with one line, not Rust's two (more with RUST_BACKTRACE)
/// and SIGABRT with a core dump, once the CLI has said which line and status
/// (`on_out_of_memory`): nothing is lost by ending there (an abort loses as much; the output's
/// temporary file has no name). Without it (--debug, the library used from Python), Rust's own
/// handler runs, backtrace included.
struct Allocator;

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// What `refused` prints: the line's text before the size that failed and after it (no size
/// when None), and the exit status.
struct OutOfMemory {
    before: Vec<u8>,
    after: Option<Vec<u8>>,
    status: i32,
}

/// Null, or an `OutOfMemory` leaked by `on_out_of_memory` (never freed: the allocator may read it
/// from any thread at any time).
static OUT_OF_MEMORY: AtomicPtr<OutOfMemory> = AtomicPtr::new(std::ptr::null_mut());

/// Print the line and end the process, when one is set; else return (Rust's handler follows).
/// Allocates nothing: stderr is unbuffered and the size is written from the stack.
fn refused(size: usize) {
    let line = OUT_OF_MEMORY.load(Ordering::Acquire);
    // SAFETY: a non-null pointer was made by Box::into_raw in `on_out_of_memory` and is never
    // freed, so it is valid for the rest of the process.
    let Some(line) = (unsafe { line.as_ref() }) else {
        return;
    };
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(&line.before);
    if let Some(after) = &line.after {
        let mut digits = [0u8; 20]; // u64::MAX has 20
        let mut at = digits.len();
        let mut n = size;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let _ = err.write_all(&digits[at..]);
        let _ = err.write_all(after);
    }
    let _ = err.write_all(b"\n");
    std::process::exit(line.status);
}

fn checked(p: *mut u8, size: usize) -> *mut u8 {
    if p.is_null() {
        refused(size);
    }
    p
}

// SAFETY: every method forwards to System with the caller's arguments, so System's guarantees
// are the allocator's; only a null result is looked at.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds GlobalAlloc::alloc's contract, which is System's.
        checked(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        checked(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds GlobalAlloc::realloc's contract: `ptr` came from this
        // allocator, that is from System, with `layout`.
        checked(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from System, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// From now on, memory the machine refuses to the core prints `line` (`{size}` in it becomes the
/// size that failed) and ends the process with `status`; None: Rust's own handler again.
#[pyfunction]
#[pyo3(signature = (line, status=4))]
pub(super) fn on_out_of_memory(line: Option<&str>, status: i32) {
    let new = line.map_or(std::ptr::null_mut(), |line| {
        let (before, after) = match line.split_once("{size}") {
            Some((before, after)) => (before, Some(after.as_bytes().to_vec())),
            None => (line, None),
        };
        Box::into_raw(Box::new(OutOfMemory {
            before: before.as_bytes().to_vec(),
            after,
            status,
        }))
    });
    OUT_OF_MEMORY.store(new, Ordering::Release); // the old one is leaked: it may be in use
}
