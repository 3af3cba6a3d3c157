#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| _core::held::pack::fuzz(data));
