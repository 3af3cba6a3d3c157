//! TLS decryption from a key log (docs/tls.md), one file per layer: `record` (framing and
//! resynchronisation), `handshake` (hellos and the few messages read), `keylog` (NSS key log
//! files), `keys` (TLS 1.2 PRF, TLS 1.3 key schedule), `cipher` (the suites and how each opens a
//! record), and `conn` (one connection's state machine, both directions).

pub mod cipher;
pub mod conn;
#[cfg(any(test, fuzzing))]
pub mod fuzz;
pub mod handshake;
pub mod keylog;
pub mod keys;
pub mod record;

pub use conn::{Output, TlsConnection, TlsInfo};
pub use keylog::KeyLog;

#[cfg(test)]
mod tests;
