//! TLS decryption from a key log (docs/tls.md), one file per layer: `record` (framing and
//! resynchronisation), `handshake` (hellos and the few messages read), `keylog` (NSS key log
//! files), `keys` (TLS 1.2 PRF, TLS 1.3 key schedule), `cipher` (the suites and how each opens a
//! record), and `conn` (one connection's state machine, both directions).

pub mod cipher;
pub mod conn;
pub mod detect;
#[cfg(any(test, fuzzing))]
pub mod fuzz;
pub mod handshake;
pub mod keylog;
pub mod keys;
pub mod record;

pub use conn::{Output, TlsConnection, TlsInfo};
pub use keylog::KeyLog;

/// TLS: recognised and decrypted by the session, its plaintext detected and decoded again.
pub const PROTOCOL: super::detect::Protocol = super::detect::Protocol {
    name: "tls",
    ports: &[443, 5044, 5043, 5045, 9093, 6514],
    detect: detect::detect,
    find_start: None,
    kinds: &["client_hello", "server_hello", "alert"],
    decoder: None,
};

#[cfg(test)]
mod tests;
