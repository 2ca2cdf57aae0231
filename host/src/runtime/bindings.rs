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

pub use self::justonce::tool::effects::EffectError;
pub use self::justonce::tool::log::Level;
