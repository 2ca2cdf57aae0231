//! The limits a guest can run into while it runs, recorded where it hit them so the
//! trap that follows is named after the limit and not after its symptom.

use wasmtime::ResourceLimiter;

/// A sandbox limit a guest ran into. Raised as the trap's error and remembered in the
/// store, so classifying the trap does not depend on how the guest reacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LimitHit {
    /// A linear memory would grow past the cap.
    #[error("the tool tried to grow its memory to {desired} bytes; the limit is {limit} bytes")]
    Memory { desired: usize, limit: usize },
    /// A table would grow past the cap.
    #[error("the tool tried to grow a table to {desired} elements; the limit is {limit}")]
    Table { desired: usize, limit: usize },
    /// One effect more than the budget.
    #[error("the tool asked for more than {limit} effects in one call")]
    Effects { limit: u32 },
    /// An effect payload over the cap.
    #[error("the tool sent an effect payload of {size} bytes; the limit is {limit} bytes")]
    Payload { size: usize, limit: usize },
    /// An effect asked for by a tool marked read-only (the message says which).
    #[error("{0}")]
    ReadOnly(String),
    /// One handle (a WASI stream, pollable or other resource) more than the cap held
    /// at once.
    #[error(
        "the tool held more than {limit} handles (WASI streams, pollables, other resources) at once; drop each one when done with it"
    )]
    Handles { limit: usize },
    /// Result parts (the `content` import) past the result size cap.
    #[error("the tool's result parts take {size} bytes; the limit is {limit} bytes")]
    Result { size: usize, limit: usize },
}

impl LimitHit {
    /// The trap reason agents and tests match on.
    pub(crate) fn reason(&self) -> super::TrapReason {
        match self {
            Self::Memory { .. } | Self::Table { .. } => super::TrapReason::MemoryLimit,
            Self::Effects { .. } => super::TrapReason::EffectBudgetExceeded,
            Self::Payload { .. } => super::TrapReason::PayloadTooLarge,
            Self::ReadOnly(_) => super::TrapReason::ReadOnlyEffect,
            Self::Handles { .. } => super::TrapReason::HandleLimit,
            Self::Result { .. } => super::TrapReason::ResultTooLarge,
        }
    }
}

/// Most handles (entries of the store's resource table: WASI streams, pollables) a
/// call may hold at once. The table's memory is the host's, outside the guest's
/// memory cap; wasmtime's own store-wide cap on a component's handles is 100 000.
pub(crate) const MAX_HANDLES: usize = 10_000;

/// Whether `error` is a handle cap: the host's resource table full, or wasmtime's
/// store-wide count of component handles reached (an error with no type of its own).
pub(crate) fn is_handle_cap(error: &wasmtime::Error) -> bool {
    error.chain().any(|e| {
        e.downcast_ref::<wasmtime::component::ResourceTableError>()
            .is_some_and(|e| matches!(e, wasmtime::component::ResourceTableError::Full))
            || e.to_string().starts_with("cannot allocate another handle")
    })
}

/// Most table elements a guest may have (function tables of Rust guests are small).
const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Most core instances, tables and memories in one store; a component compiled from
/// one crate has a handful of each.
/// (The pool in `pool.rs` is sized from the same numbers.)
pub(crate) const MAX_INSTANCES: usize = 16;
pub(crate) const MAX_TABLES: usize = 64;
pub(crate) const MAX_MEMORIES: usize = 16;

/// The store's resource limiter: counts of instances, tables and memories, and caps
/// on memory and table growth that record the hit before they trap.
pub(crate) struct CallLimiter {
    memory_bytes: usize,
    /// The first limit this call ran into.
    pub hit: Option<LimitHit>,
}

impl CallLimiter {
    pub(crate) fn new(memory_bytes: usize) -> Self {
        Self {
            memory_bytes,
            hit: None,
        }
    }

    fn refuse(&mut self, hit: LimitHit) -> wasmtime::Result<bool> {
        self.hit.get_or_insert(hit.clone());
        Err(wasmtime::Error::new(hit))
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            return self.refuse(LimitHit::Memory {
                desired,
                limit: self.memory_bytes,
            });
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return self.refuse(LimitHit::Table {
                desired,
                limit: MAX_TABLE_ELEMENTS,
            });
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}
