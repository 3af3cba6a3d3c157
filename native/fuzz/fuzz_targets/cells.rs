#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| _core::decoders::cql::fuzz::cells(data));
