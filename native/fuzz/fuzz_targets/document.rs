#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| _core::model::json::canon::fuzz(data));
