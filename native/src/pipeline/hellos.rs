//! What `wirelog streams` says of TLS streams without decoding them: a stream whose first bytes
//! are a TLS record goes through a TLS layer of its own only until the handshake is read (version,
//! suite, SNI; with a key log, until the server's Finished, so that the encrypted extensions give
//! the ALPN and `decrypted` tells the key works). Then, and at the first bytes of any other
//! stream, the source stops producing the stream's bytes: the cost is a handshake per TLS stream.

use std::collections::HashMap;
use std::sync::Arc;

use crate::decoders::tls::detect::tls_record;
use crate::decoders::tls::{KeyLog, TlsConnection, TlsInfo};
use crate::decoders::{Chunk, Gap};
use crate::model::Value;

/// Bytes a stream's TLS layer reads at most: a handshake is a few kilobytes (certificate chains
/// included); a stream caught after its handshake would otherwise be read to its end.
const HANDSHAKE_BUDGET: u64 = 256 << 10;

enum Sniff {
    Reading { conn: Box<TlsConnection>, read: u64 },
    Read(TlsInfo),
    NotTls,
}

#[derive(Default)]
pub struct Hellos {
    streams: HashMap<u64, Sniff>,
}

impl Hellos {
    /// A stream's bytes; true when its bytes are no longer needed. `keylog`: the key logs known
    /// now (a stream's layer keeps those of its first bytes).
    pub fn chunk(&mut self, stream: u64, chunk: &Chunk<'_>, keylog: &Arc<KeyLog>) -> bool {
        let sniff = self.streams.entry(stream).or_insert_with(|| {
            if tls_record(chunk.data) {
                Sniff::Reading {
                    conn: Box::new(TlsConnection::new(Arc::clone(keylog))),
                    read: 0,
                }
            } else {
                Sniff::NotTls
            }
        });
        let Sniff::Reading { conn, read } = sniff else {
            return true;
        };
        conn.feed(chunk, &mut Vec::new());
        *read = read.saturating_add(chunk.data.len() as u64);
        if conn.handshake_read() || *read > HANDSHAKE_BUDGET {
            *sniff = Sniff::Read(conn.info().clone());
            return true;
        }
        false
    }

    pub fn gap(&mut self, stream: u64, gap: &Gap) {
        if let Some(Sniff::Reading { conn, .. }) = self.streams.get_mut(&stream) {
            conn.gap(gap, &mut Vec::new());
        }
    }

    /// The end of a stream: its TLS description (`version`, `cipher_suite`, `sni`, `alpn`,
    /// `decrypted`), None when it is not TLS.
    pub fn end(&mut self, stream: u64) -> Option<Value> {
        match self.streams.remove(&stream)? {
            Sniff::Reading { conn, .. } => Some(conn.info().to_value()),
            Sniff::Read(info) => Some(info.to_value()),
            Sniff::NotTls => None,
        }
    }
}
