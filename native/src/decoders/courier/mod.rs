//! Log Courier (driskell/log-courier): HELO/VERS handshake, JDAT and streamed EVNT payloads,
//! ACKN, PING/PONG. Facts and citations: ../shared/reference/courier.md.
//!
//! Modules, one job each: `framing` (headers and length rules), `buffer` (one receive buffer per
//! direction), `handshake` (HELO/VERS layouts), `payload` (capped inflate, event framing, JSON), `delivery` (ACKN bookkeeping),
//! `resend` (nonces across connections), `fingerprint`, `findings`, `decoder`, `detect`
//! (content detection and the mid-stream start, for the engine), `fuzz` (the fuzz target's body).

mod decoder;
#[allow(
    clippy::arithmetic_side_effects,
    reason = "u64 counters of events and ACKNs; releases go up to at most what is held (upto > released, held > max_pending where subtracted); capture times are subtracted as i128"
)]
mod delivery;
pub mod detect;
mod findings;
mod fingerprint;
mod framing;
#[cfg(any(test, fuzzing))]
pub mod fuzz;
mod handshake;
mod payload;
#[allow(
    clippy::arithmetic_side_effects,
    reason = "bytes of digests kept: sums and differences of the lengths of vectors the registry holds"
)]
mod resend;
#[cfg(test)]
mod tests;

pub use decoder::CourierDecoder;

/// Log Courier (its own port numbers vary: detected by content only).
pub const PROTOCOL: super::detect::Protocol = super::detect::Protocol {
    name: "courier",
    ports: &[],
    detect: detect::detect,
    find_start: Some(detect::find_start),
    kinds: &[
        "helo",
        "vers",
        "ping",
        "pong",
        "unknown_reply",
        "unknown_type",
        "jdat",
        "evnt",
        "ackn",
        "event",
        "delivery",
        "connection",
    ],
    decoder: Some(|ctx| Box::new(CourierDecoder::new(ctx))),
};

/// State shared by the courier connections of one capture: the last sending of each nonce, so
/// a resend on another connection is recognised.
#[derive(Debug, Default)]
pub struct Shared {
    nonces: resend::Shared,
    /// Events held until their payload's ACKN.
    pub held: crate::held::spill::SpillStore,
    /// The inflater of whole JDAT/EVNT payloads, restarted for each.
    inflater: Option<payload::Inflater>,
}
