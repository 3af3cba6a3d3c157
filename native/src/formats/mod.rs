//! Byte formats owned by no protocol: the decoders read them and the writers write them.

pub mod hercules;
