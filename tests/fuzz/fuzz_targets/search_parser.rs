//! Any text through the SQL dialect's parsers (resources and changes) and the keyword
//! search: an answer or a refusal, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = karpor_search::parse(text);
        let _ = karpor_search::parse_changes(text);
        let _ = karpor_search::keyword(text);
    }
});
