#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| _core::tcp::fuzz::causal(data));
