#![no_main]
libfuzzer_sys::fuzz_target!(|input: tessera_fuzz_harness::ArbitraryDataset| tessera_fuzz_harness::roundtrip(&input));
