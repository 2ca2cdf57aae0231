//! The one place the host generates bindings from `wit/`, so every mapping lives here.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tool",
    imports: {
        // A host fault while guarding an effect (the journal failed) traps the guest
        // instead of being reported to it as a domain error.
        "justonce:tool/effects.perform": trappable,
        // Result parts past the size cap trap the guest.
        "justonce:tool/content.add": trappable,
        // An ask whose answers come later ends the run: the guest is stopped.
        "justonce:tool/input.ask": trappable,
    },
});

/// The `reconciling-tool` world: a `tool` that also exports `reconcile`. Its imports
/// are the `tool` world's, bound once above.
pub mod reconciling {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "reconciling-tool",
        with: {
            "justonce:tool/types": super::justonce::tool::types,
            "justonce:tool/effects": super::justonce::tool::effects,
            "justonce:tool/log": super::justonce::tool::log,
            "justonce:tool/content": super::justonce::tool::content,
            "justonce:tool/progress": super::justonce::tool::progress,
            "justonce:tool/input": super::justonce::tool::input,
        },
    });
}

pub use self::justonce::tool::effects::EffectError;
pub use self::justonce::tool::log::Level;
pub use self::justonce::tool::types::{PendingEffect, Reconciled};
