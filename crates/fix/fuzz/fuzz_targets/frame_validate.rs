//! Any bytes through `next_frame`, the field walk and validation for every version: nothing
//! may panic, and `next_frame` must make progress within the buffer. The input is walked as
//! it is, and also as the body of a message given a right BodyLength and CheckSum, so that
//! the fuzzer reaches the dictionary checks rather than stopping at the checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rialto_fix::parse::checksum;
use rialto_fix::{ApplVersion, dict, next_frame};

fn walk(data: &[u8]) {
    let mut buf = data;
    while !buf.is_empty() {
        match next_frame(buf, 1 << 16) {
            Ok(None) => break,
            Ok(Some((frame, len))) => {
                assert!(len > 0 && len <= buf.len());
                assert_eq!(frame.bytes.as_ptr(), buf.as_ptr());
                for field in frame.fields() {
                    let _ = field;
                }
                for version in ApplVersion::ALL {
                    let _ = dict::validate(version, &frame);
                }
                buf = &buf[len..];
            }
            Err(garbled) => {
                assert!(garbled.skip > 0 && garbled.skip <= buf.len());
                buf = &buf[garbled.skip..];
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    walk(data);
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let begin = ["FIX.4.2", "FIX.4.4", "FIXT.1.1"][usize::from(pick % 3)];
    let mut framed = format!("8={begin}\u{1}9={}\u{1}", body.len()).into_bytes();
    framed.extend_from_slice(body);
    let sum = checksum(&framed);
    framed.extend_from_slice(format!("10={sum:03}\u{1}").as_bytes());
    walk(&framed);
});
