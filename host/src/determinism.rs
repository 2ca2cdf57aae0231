//! Deterministic replay of the values a guest reads from WASI: clocks and random.
//!
//! A resumed run must ask for the same effects as the run it resumes, or the guard
//! refuses it as a divergence. A tool that puts the time or a random id into an
//! effect's payload would diverge on every resume if those values came from the
//! machine. So they come from the invocation's journal instead:
//!
//! - The **wall clock** starts at the invocation's creation time (on the host's
//!   injected [`Clock`](crate::Clock)) and advances 1 µs per reading.
//! - The **monotonic clock** starts at 0 and advances 1 µs per reading, so two
//!   readings always differ and never go backwards.
//! - **Random** bytes (`wasi:random/random`, `insecure`, `insecure-seed`) are a
//!   SHA-256 counter-mode stream of a 256-bit seed drawn from the operating system
//!   once, when the invocation is first journaled.
//!
//! A guest that reads the same values in the same order sees the same values on every
//! run of the same invocation. The seed is stored in the journal, so whoever can read
//! the journal can predict a guest's random values: they are unique per invocation,
//! not secret from the host.

use std::cell::Cell;
use std::convert::Infallible;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

use crate::error::{Error, Result};

/// How far a guest's clocks advance per reading.
const TICK: Duration = Duration::from_micros(1);

/// The seed of one invocation's random values: 32 bytes, stored as 64 hex characters.
#[derive(Clone, PartialEq, Eq)]
pub struct Seed([u8; 32]);

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Seed({})", self.to_hex())
    }
}

impl Seed {
    /// A fresh, unpredictable seed: SHA-256 of a secret drawn once per process from
    /// the operating system's random source and a counter (one system call per
    /// process, not per call).
    pub fn random() -> Result<Self> {
        static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let secret = match SECRET.get() {
            Some(secret) => secret,
            None => {
                // A failure is reported and tried again on the next call.
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes).map_err(|e| {
                    Error::Host(anyhow::anyhow!(
                        "the operating system gave no random seed for a guest: {e}"
                    ))
                })?;
                SECRET.get_or_init(|| bytes)
            }
        };
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut hash = Sha256::new();
        hash.update(b"justonce.seed.v1");
        hash.update(secret);
        hash.update(n.to_le_bytes());
        Ok(Self(hash.finalize().into()))
    }

    /// The invocation's generation, which its effect keys include (see
    /// [`effect_key`](crate::keys::effect_key)): the seed's first 48 bits, so it is as
    /// unpredictable as the seed and exact as a JSON number.
    pub fn generation(&self) -> u64 {
        let mut bytes = [0u8; 8];
        bytes[2..].copy_from_slice(&self.0[..6]);
        u64::from_be_bytes(bytes)
    }

    /// The seed as stored in the journal: 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Reads a stored seed; `None` unless `hex` is exactly 64 hex characters.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex, &mut bytes).ok()?;
        Some(Self(bytes))
    }
}

/// What one run of an invocation hands its guest instead of the machine's clocks and
/// random source: the journaled seed and the invocation's start time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestEntropy {
    /// The journaled seed.
    pub seed: Seed,
    /// The invocation's creation time, ms since the Unix epoch (the wall clock's start).
    pub started_ms: i64,
}

impl GuestEntropy {
    /// The values a tool sees while it only describes itself: fixed, since nothing a
    /// tool does then is journaled.
    pub(crate) fn describe() -> Self {
        Self {
            seed: Seed([0; 32]),
            started_ms: 0,
        }
    }

    /// Points the guest's WASI clocks and random sources at this run's values.
    pub(crate) fn configure(&self, wasi: &mut WasiCtxBuilder) {
        let start = Duration::from_millis(u64::try_from(self.started_ms).unwrap_or(0));
        wasi.wall_clock(ReplayWallClock {
            start,
            readings: Cell::new(0),
        })
        .monotonic_clock(ReplayMonotonicClock {
            readings: Cell::new(0),
        })
        .secure_random(ReplayRng::new(&self.seed, Stream::Secure))
        .insecure_random(ReplayRng::new(&self.seed, Stream::Insecure))
        .insecure_random_seed(insecure_seed(&self.seed));
    }
}

/// The wall clock a guest sees: the invocation's start, plus one tick per reading.
struct ReplayWallClock {
    start: Duration,
    readings: Cell<u32>,
}

impl HostWallClock for ReplayWallClock {
    fn resolution(&self) -> Duration {
        TICK
    }

    fn now(&self) -> Duration {
        let n = self.readings.get();
        self.readings.set(n.saturating_add(1));
        self.start.saturating_add(TICK.saturating_mul(n))
    }
}

/// The monotonic clock a guest sees: 0, plus one tick per reading.
struct ReplayMonotonicClock {
    readings: Cell<u64>,
}

impl HostMonotonicClock for ReplayMonotonicClock {
    fn resolution(&self) -> u64 {
        tick_nanos()
    }

    fn now(&self) -> u64 {
        let n = self.readings.get();
        self.readings.set(n.saturating_add(1));
        n.saturating_mul(tick_nanos())
    }
}

fn tick_nanos() -> u64 {
    u64::try_from(TICK.as_nanos()).unwrap_or(u64::MAX)
}

/// The independent streams drawn from one seed.
#[derive(Clone, Copy)]
enum Stream {
    Secure = 1,
    Insecure = 2,
    InsecureSeed = 3,
}

fn block(seed: &Seed, stream: Stream, counter: u64) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(b"justonce.random.v1");
    hash.update([stream as u8]);
    hash.update(seed.0);
    hash.update(counter.to_be_bytes());
    hash.finalize().into()
}

fn insecure_seed(seed: &Seed) -> u128 {
    let bytes = block(seed, Stream::InsecureSeed, 0);
    u128::from_le_bytes(bytes[..16].try_into().expect("16 of 32 bytes"))
}

/// A random stream: SHA-256 of the seed and a block counter, read byte by byte, so
/// the same sequence of requests always gets the same bytes.
struct ReplayRng {
    seed: Seed,
    stream: Stream,
    counter: u64,
    buffer: [u8; 32],
    used: usize,
}

impl ReplayRng {
    fn new(seed: &Seed, stream: Stream) -> Self {
        Self {
            seed: seed.clone(),
            stream,
            counter: 0,
            buffer: [0; 32],
            used: 32,
        }
    }

    fn fill(&mut self, dst: &mut [u8]) {
        for byte in dst {
            if self.used == self.buffer.len() {
                self.buffer = block(&self.seed, self.stream, self.counter);
                self.counter = self.counter.wrapping_add(1);
                self.used = 0;
            }
            *byte = self.buffer[self.used];
            self.used += 1;
        }
    }
}

impl rand_core::TryRng for ReplayRng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut bytes = [0; 4];
        self.fill(&mut bytes);
        Ok(u32::from_le_bytes(bytes))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut bytes = [0; 8];
        self.fill(&mut bytes);
        Ok(u64::from_le_bytes(bytes))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        self.fill(dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rand_core::Rng;

    use super::*;

    #[test]
    fn a_seed_round_trips_through_hex_and_bad_hex_is_refused() {
        let seed = Seed::random().unwrap();
        assert_eq!(Seed::from_hex(&seed.to_hex()), Some(seed.clone()));
        assert_eq!(seed.to_hex().len(), 64);
        assert_eq!(Seed::from_hex("abc"), None);
        assert_eq!(Seed::from_hex(&"zz".repeat(32)), None);
        assert_ne!(Seed::random().unwrap(), seed, "two draws differ");
    }

    #[test]
    fn the_same_seed_gives_the_same_stream_however_it_is_read() {
        let seed = Seed::random().unwrap();
        let mut whole = [0u8; 40];
        ReplayRng::new(&seed, Stream::Secure).fill_bytes(&mut whole);
        let mut pieces = ReplayRng::new(&seed, Stream::Secure);
        let mut split = [0u8; 40];
        pieces.fill_bytes(&mut split[..3]);
        pieces.fill_bytes(&mut split[3..]);
        assert_eq!(whole, split);
        let mut insecure = [0u8; 40];
        ReplayRng::new(&seed, Stream::Insecure).fill_bytes(&mut insecure);
        assert_ne!(whole, insecure, "streams are independent");
        let mut other = [0u8; 40];
        ReplayRng::new(&Seed::random().unwrap(), Stream::Secure).fill_bytes(&mut other);
        assert_ne!(whole, other, "seeds are independent");
    }

    #[test]
    fn clocks_start_at_the_journaled_time_and_advance_per_reading() {
        let wall = ReplayWallClock {
            start: Duration::from_millis(1_767_225_600_000),
            readings: Cell::new(0),
        };
        let first = wall.now();
        let second = wall.now();
        assert_eq!(first.as_millis(), 1_767_225_600_000);
        assert_eq!(second - first, TICK);
        let mono = ReplayMonotonicClock {
            readings: Cell::new(0),
        };
        let (a, b) = (mono.now(), mono.now());
        assert!(b > a);
    }
}
