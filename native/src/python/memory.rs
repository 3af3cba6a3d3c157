//! The module's global allocator: small blocks from mimalloc, large ones from glibc (`LARGE`;
//! docs/architecture.md, The boundary, measures why), and memory the machine refuses ends the
//! process with the CLI's line (`on_out_of_memory`) instead of Rust's abort.
//! FFI glue: each `unsafe` says why it is sound.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Once;

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

/// Set once mimalloc refused a small block that glibc then made: from then on each small block
/// freed is asked which of the two made it (mimalloc reserves address space in large arenas, so
/// under an address-space limit, `ulimit -v`, it can fail where glibc still has room; memory then
/// runs out where it did before mimalloc, with the CLI's line).
static FELL_BACK: AtomicBool = AtomicBool::new(false);

/// mimalloc's `arena_reserve` option: its place in mimalloc.h's `mi_option_e` (v3, the version
/// Cargo.lock pins; libmimalloc-sys names no constant for it). Its value is in KiB.
const MI_OPTION_ARENA_RESERVE: libmimalloc_sys::mi_option_t = 23;

/// Arenas of the smallest size mimalloc makes, 32 MiB, under an address-space limit.
const LIMITED_ARENA_KIB: std::ffi::c_long = 32 << 10;

static ARENAS_SIZED: Once = Once::new();

/// Before mimalloc's first allocation: under an address-space limit (`ulimit -v`, a container's),
/// its arenas are reserved 32 MiB at a time, not 1 GiB: address space it reserves and does not use
/// is refused to glibc's malloc, which Python and Arrow allocate from, and a run refused memory
/// with most of its limit unused is what cli/address_space.py exists to prevent. A
/// MIMALLOC_ARENA_RESERVE in the environment wins. Allocates nothing (this is the allocator).
fn size_arenas() {
    ARENAS_SIZED.call_once(|| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given; getenv reads a NUL-terminated name.
        let limited = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0
            && limit.rlim_cur != libc::RLIM_INFINITY;
        let chosen = unsafe { !libc::getenv(c"MIMALLOC_ARENA_RESERVE".as_ptr()).is_null() };
        if limited && !chosen {
            // SAFETY: sets one of mimalloc's options, a value it reads when it reserves an arena.
            unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_RESERVE, LIMITED_ARENA_KIB) }
        }
    });
}

/// Blocks of this size and more are glibc's, smaller ones mimalloc's: the small ones (records,
/// their fields and texts) are where mimalloc saves CPU; the larger ones (batches, builders,
/// inflate and spill buffers) cost it memory. mimalloc keeps freed memory ~100 ms before it purges
/// it and packs a size in pages of its own, and with everything below 256 KiB its own, peak RSS of
/// converting bench_lumberjack's capture to Parquet rose 9 %, bench_spark's one-machine capture
/// 20 % (docs/architecture.md, The boundary).
const LARGE: usize = 4 << 10;

fn is_large(size: usize) -> bool {
    size >= LARGE
}

/// A block for `layout` from the allocator its size calls for, glibc when mimalloc could not
/// (noted in FELL_BACK); null when neither could.
///
/// # Safety
/// GlobalAlloc::alloc's contract: `layout` has a non-zero size.
unsafe fn allocate(layout: Layout, zeroed: bool) -> *mut u8 {
    // SAFETY (each call): the caller's contract, which is both allocators'.
    let system = || unsafe {
        if zeroed {
            System.alloc_zeroed(layout)
        } else {
            System.alloc(layout)
        }
    };
    if is_large(layout.size()) {
        return system();
    }
    size_arenas();
    let p = unsafe {
        if zeroed {
            MiMalloc.alloc_zeroed(layout)
        } else {
            MiMalloc.alloc(layout)
        }
    };
    if !p.is_null() {
        return p;
    }
    FELL_BACK.store(true, Ordering::Relaxed);
    system()
}

/// Whether `ptr`, a block of `size` bytes of this allocator, is mimalloc's.
fn from_mimalloc(ptr: *mut u8, size: usize) -> bool {
    // Relaxed: a block glibc made for want of mimalloc reaches another thread through a
    // synchronisation that also carries the store made before it was allocated.
    // SAFETY: mi_is_in_heap_region only looks the address up in mimalloc's own page map.
    !is_large(size)
        && (!FELL_BACK.load(Ordering::Relaxed)
            || unsafe { libmimalloc_sys::mi_is_in_heap_region(ptr.cast()) })
}

// SAFETY: every block comes from mimalloc or glibc (`allocate`) and goes back to the one that made
// it (`from_mimalloc`), each called with the caller's arguments.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds alloc's contract.
        checked(unsafe { allocate(layout, false) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        checked(unsafe { allocate(layout, true) }, layout.size())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let mimalloc = from_mimalloc(ptr, layout.size());
        // SAFETY (each call): the caller upholds realloc's contract: `ptr` is this allocator's
        // block of `layout`, `new_size` is non-zero and, rounded to the alignment, fits an isize.
        let p = if mimalloc && !is_large(new_size) {
            unsafe { MiMalloc.realloc(ptr, layout, new_size) }
        } else if !mimalloc && is_large(layout.size()) == is_large(new_size) {
            unsafe { System.realloc(ptr, layout, new_size) } // glibc's, and stays glibc's
        } else {
            std::ptr::null_mut() // to the other allocator, below
        };
        if !p.is_null() {
            return p;
        }
        // Crossing LARGE, or mimalloc refused: a new block where `allocate` puts it, the bytes
        // copied, the old block freed by its own allocator (on failure it is left as it was).
        let new = unsafe {
            allocate(
                Layout::from_size_align_unchecked(new_size, layout.align()),
                false,
            )
        };
        if !new.is_null() {
            // SAFETY: both blocks hold at least the bytes copied and are distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        checked(new, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` is this allocator's block of `layout`, so from the one from_mimalloc says.
        if from_mimalloc(ptr, layout.size()) {
            unsafe { MiMalloc.dealloc(ptr, layout) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
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
