//! The pooling instance allocator, sized from the sandbox's limits, and the permits
//! that keep concurrent calls within the pool.
//!
//! A fresh `Store` per call is the sandbox's isolation; the pooling allocator makes it
//! cheap by reusing pre-reserved slots (memory, tables, instance metadata) instead of
//! mapping new ones for every call.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use wasmtime::PoolingAllocationConfig;

use super::{Runtime, ToolLimits, limiter};
use crate::error::Error;

/// Calls of one runtime that can run at the same time; a further caller waits for a
/// slot (see [`CallPermits`]) instead of failing to instantiate.
pub const CONCURRENT_CALLS: u32 = 128;

/// The per-store caps of `Runtime::store` (its `CallLimiter`); the pool refuses the
/// same components the store would, at instantiation instead of halfway through.
const MAX_INSTANCES: u32 = limiter::MAX_INSTANCES as u32;
/// See [`MAX_INSTANCES`].
const MAX_TABLES: u32 = limiter::MAX_TABLES as u32;
/// See [`MAX_INSTANCES`].
const MAX_MEMORIES: u32 = limiter::MAX_MEMORIES as u32;

/// Linear memories reserved per call slot. Components built for wasm32-wasip2 have one
/// memory; a component with more still runs while the pool has memories to spare.
const MEMORIES_PER_SLOT: u32 = 2;
/// Tables reserved per call slot (a component and its shims use a few).
const TABLES_PER_SLOT: u32 = 8;
/// Linear memory and tables kept resident (reset with `memset` rather than `madvise`)
/// when a slot is reused, so a small guest takes fewer page faults. Measured on the echo
/// guest without `PAGEMAP_SCAN`: a bare call took 19 µs with 64 KiB, 23 µs with none
/// and 31 µs with 1 MiB (the `memset` of the whole region then dominates).
const KEEP_RESIDENT: usize = 64 << 10;
/// Linear memory kept resident where `PAGEMAP_SCAN` is available: then only the pages
/// a call wrote are reset (copied back from the memory image or zeroed), up to this
/// much, so a guest whose calls dirty a few MiB (Python and JavaScript tools, built
/// with an interpreter and a snapshot of its heap) keeps its pages mapped instead of
/// faulting them in again at every call; the rest is still given back with `madvise`.
/// Each call still starts from the image's contents. Measured in release
/// (`JUSTONCE_BENCH_PROFILE=python|javascript`, CPU time per warm guarded call, 2
/// pairs): JavaScript 1 019 → 711 µs, Python 2 010 → 1 750 µs with 8 MiB (16 MiB: no
/// better); Rust's echo unchanged (it dirties a few pages). The cost: a slot left warm
/// keeps up to this much resident between calls. What still faults: wasmtime's scan
/// reports at most 32 runs of written pages, and both probes' calls write more runs
/// than that, so the memory past the 32nd is still given back (`strace`: one `madvise`
/// of ~7 MiB per Python call, ~3 MiB per JavaScript call).
const KEEP_RESIDENT_SCANNED: usize = 8 << 20;

/// The pool for a runtime whose calls may grow a linear memory to `memory_bytes`.
/// A call slot is one component instance (one call, or one `describe` while loading).
pub(crate) fn pooling_config(memory_bytes: usize) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(CONCURRENT_CALLS)
        .total_core_instances(CONCURRENT_CALLS * MAX_INSTANCES)
        .total_memories(CONCURRENT_CALLS * MEMORIES_PER_SLOT)
        .total_tables(CONCURRENT_CALLS * TABLES_PER_SLOT)
        .max_core_instances_per_component(MAX_INSTANCES)
        .max_memories_per_component(MAX_MEMORIES)
        .max_tables_per_component(MAX_TABLES)
        .max_memories_per_module(MAX_MEMORIES)
        .max_tables_per_module(MAX_TABLES)
        .max_memory_size(memory_bytes)
        .linear_memory_keep_resident(memory_keep_resident().min(memory_bytes))
        .table_keep_resident(KEEP_RESIDENT)
        // Resets only the pages a call dirtied, with `memset`, instead of `madvise`
        // (Linux 6.7+; off elsewhere). Measured on the echo guest: a bare call took
        // 9.5 µs instead of 19 µs, and a guarded one 21 µs instead of 65 µs — with the
        // journal's writer thread on the other core, every `madvise` also cost a TLB
        // shootdown across cores.
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
}

/// How much of a linear memory a slot keeps resident: a few MiB where only the written
/// pages are reset (see [`KEEP_RESIDENT_SCANNED`]), else [`KEEP_RESIDENT`] (every
/// reset `memset`s all of it).
fn memory_keep_resident() -> usize {
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        KEEP_RESIDENT_SCANNED
    } else {
        KEEP_RESIDENT
    }
}

/// Refuses limits that give a tool (or the defaults) more linear memory than the
/// runtime's pooled slots hold: such a call could never reach its own memory limit.
pub(crate) fn check_fits(runtime: &Runtime, limits: &ToolLimits) -> Result<(), Error> {
    let slot = runtime.pool_memory_bytes();
    let tools = limits
        .tools
        .iter()
        .map(|(name, l)| (format!("tool `{name}`"), l));
    for (who, l) in
        std::iter::once(("the default limits".to_string(), &limits.defaults)).chain(tools)
    {
        if l.memory_bytes > slot {
            return Err(Error::Config {
                path: PathBuf::from("<limits>"),
                reason: format!(
                    "{who} allow {} bytes of memory, more than the {slot} bytes of the runtime's \
                     pooled slots; build the Runtime with limits of at least that much memory",
                    l.memory_bytes
                ),
            });
        }
    }
    Ok(())
}

/// A counting semaphore over the pool's call slots.
#[derive(Debug)]
pub(crate) struct CallPermits {
    slots: Mutex<Slots>,
    released: Condvar,
}

#[derive(Debug)]
struct Slots {
    free: u32,
    /// Callers waiting for a slot: only then does a release wake one (a notify is
    /// a system call even when no one waits, and a release happens once a call).
    waiting: u32,
}

/// One call slot, given back when dropped.
pub(crate) struct CallPermit<'a>(&'a CallPermits);

impl CallPermits {
    pub(crate) fn new(slots: u32) -> Self {
        Self {
            slots: Mutex::new(Slots {
                free: slots,
                waiting: 0,
            }),
            released: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many slots are free now.
    pub(crate) fn free(&self) -> u32 {
        self.lock().free
    }

    /// Waits at most `bound` for a free slot; `None` when every slot stayed taken.
    /// Every call ends within its deadline (waits in WASI calls included), so a bound
    /// of a deadline or so lets a caller through behind calls that run to theirs.
    pub(crate) fn acquire_within(&self, bound: Duration) -> Option<CallPermit<'_>> {
        let mut slots = self.lock();
        if slots.free == 0 {
            slots.waiting += 1;
            let (waited, _) = self
                .released
                .wait_timeout_while(slots, bound, |s| s.free == 0)
                .unwrap_or_else(|p| p.into_inner());
            slots = waited;
            slots.waiting -= 1;
            if slots.free == 0 {
                return None;
            }
        }
        slots.free -= 1;
        Some(CallPermit(self))
    }
}

impl Drop for CallPermit<'_> {
    fn drop(&mut self) {
        let mut slots = self.0.lock();
        slots.free += 1;
        if slots.waiting > 0 {
            self.0.released.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn permits_never_exceed_the_slots() {
        let permits = Arc::new(CallPermits::new(2));
        let inside = Arc::new(AtomicU32::new(0));
        let most = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (permits, inside, most) = (permits.clone(), inside.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let _permit = permits.acquire_within(Duration::from_secs(60)).unwrap();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(
            most.load(Ordering::SeqCst) <= 2,
            "at most two holders at once"
        );
        assert_eq!(permits.free(), 2, "every permit came back");
        assert_eq!(permits.lock().waiting, 0, "no one left waiting");
    }

    #[test]
    fn a_caller_waits_for_a_slot_at_most_its_bound() {
        let permits = CallPermits::new(1);
        let held = permits.acquire_within(Duration::ZERO).expect("a free slot");
        assert!(
            permits.acquire_within(Duration::from_millis(10)).is_none(),
            "every slot is taken"
        );
        drop(held);
        assert!(permits.acquire_within(Duration::ZERO).is_some());
    }

    /// A caller waiting for a slot is woken by its release, not by its bound (the
    /// wake-up is not skipped for being needed only when someone waits); one that
    /// gave up is no longer counted as waiting.
    #[test]
    fn a_release_wakes_a_caller_waiting_for_the_slot() {
        let permits = Arc::new(CallPermits::new(1));
        let held = permits.acquire_within(Duration::ZERO).expect("a free slot");
        assert!(permits.acquire_within(Duration::from_millis(1)).is_none());
        assert_eq!(permits.lock().waiting, 0, "the caller that gave up");
        let waiter = {
            let permits = Arc::clone(&permits);
            // Far longer than the test: woken only by the release (a release that
            // does not notify leaves this test hanging, the harness's to report).
            std::thread::spawn(move || permits.acquire_within(Duration::from_secs(3600)).is_some())
        };
        while permits.lock().waiting == 0 {
            std::thread::yield_now();
        }
        drop(held);
        assert!(waiter.join().unwrap(), "the waiter got the released slot");
        assert_eq!(permits.free(), 1, "and gave it back");
    }
}
