//! Finding FIX messages in a receive buffer and walking their fields in place.
//!
//! [`next_frame`] checks the envelope (BeginString first, BodyLength second, MsgType third,
//! CheckSum last and correct) and returns a [`Frame`] that borrows the buffer. A [`Frame`]
//! hands out its fields through [`Fields`], an iterator that parses each `tag=value<SOH>` as it
//! goes. Nothing is copied and nothing is allocated.

use crate::SOH;

/// The longest BeginString accepted ("FIXT.1.1" is 8 bytes).
const MAX_BEGIN_STRING: usize = 16;
/// The most digits a BodyLength may have.
const MAX_BODY_LENGTH_DIGITS: usize = 7;
/// "10=" + three digits + SOH.
const TRAILER_LEN: usize = 7;

/// A whole, verified message borrowed from the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The message from "8=" to the SOH after the checksum.
    pub bytes: &'a [u8],
    pub begin_string: &'a [u8],
    pub msg_type: &'a [u8],
    /// Where the fields after MsgType start, and where the trailer starts, in `bytes`.
    fields_start: usize,
    trailer_start: usize,
}

/// Input that is not a well-formed message. FIX says garbled messages are ignored (no reject,
/// no sequence number consumed); `skip` is how many bytes to drop to get past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("garbled message: {reason}")]
pub struct Garbled {
    pub skip: usize,
    pub reason: &'static str,
}

/// One field, its value borrowed from the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    pub tag: u32,
    pub value: &'a [u8],
}

/// A field that could not be read. Maps onto the session Reject reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// The tag is not a positive number (SessionRejectReason 0, invalid tag number).
    #[error("invalid tag number")]
    InvalidTag,
    /// `tag=` with nothing after it (SessionRejectReason 4).
    #[error("tag {0} specified without a value")]
    NoValue(u32),
}

/// Looks for the first whole message at the start of `buf`.
///
/// - `Ok(None)`: more bytes are needed (nothing is wrong yet).
/// - `Ok(Some((frame, len)))`: a message of `len` bytes; drop them once it is handled.
/// - `Err(garbled)`: the start of `buf` is not a good message; drop `garbled.skip` bytes.
pub fn next_frame(buf: &[u8], max_len: usize) -> Result<Option<(Frame<'_>, usize)>, Garbled> {
    let garbled = |reason| Garbled {
        skip: resync_point(buf),
        reason,
    };
    if buf.len() < 2 {
        return if buf.is_empty() || buf[0] == b'8' {
            Ok(None)
        } else {
            Err(garbled("a message must start with BeginString (8)"))
        };
    }
    if &buf[..2] != b"8=" {
        return Err(garbled("a message must start with BeginString (8)"));
    }
    let Some(begin_end) = find_soh(buf, 2, MAX_BEGIN_STRING) else {
        return if buf.len() < 2 + MAX_BEGIN_STRING + 1 {
            Ok(None)
        } else {
            Err(garbled("BeginString is too long"))
        };
    };
    let begin_string = &buf[2..begin_end];
    let length_tag = begin_end + 1;
    if buf.len() < length_tag + 2 {
        return Ok(None);
    }
    if &buf[length_tag..length_tag + 2] != b"9=" {
        return Err(garbled("BodyLength (9) must be the second field"));
    }
    let digits_start = length_tag + 2;
    let Some(length_end) = find_soh(buf, digits_start, MAX_BODY_LENGTH_DIGITS) else {
        return if buf.len() < digits_start + MAX_BODY_LENGTH_DIGITS + 1 {
            Ok(None)
        } else {
            Err(garbled("BodyLength is too long"))
        };
    };
    let Some(body_len) = parse_uint(&buf[digits_start..length_end]) else {
        return Err(garbled("BodyLength is not a number"));
    };
    let body_start = length_end + 1;
    let trailer_start = body_start + body_len as usize;
    let total = trailer_start + TRAILER_LEN;
    if total > max_len {
        return Err(garbled("message longer than the limit"));
    }
    if buf.len() < total {
        return Ok(None);
    }
    let trailer = &buf[trailer_start..total];
    if &trailer[..3] != b"10=" || trailer[6] != SOH || buf[trailer_start - 1] != SOH {
        return Err(garbled("CheckSum (10) is not where BodyLength says"));
    }
    let Some(declared) = parse_uint(&trailer[3..6]) else {
        return Err(garbled("CheckSum is not three digits"));
    };
    if declared != u64::from(checksum(&buf[..trailer_start])) {
        // The length is known to be right: skip exactly this message.
        return Err(Garbled {
            skip: total,
            reason: "wrong CheckSum",
        });
    }
    let body = &buf[body_start..trailer_start];
    if body.len() < 5 || &body[..3] != b"35=" {
        return Err(Garbled {
            skip: total,
            reason: "MsgType (35) must be the third field",
        });
    }
    let Some(type_end) = find_soh(buf, body_start + 3, body.len() - 3) else {
        return Err(Garbled {
            skip: total,
            reason: "MsgType is not terminated",
        });
    };
    let msg_type = &buf[body_start + 3..type_end];
    if msg_type.is_empty() {
        return Err(Garbled {
            skip: total,
            reason: "MsgType is empty",
        });
    }
    let frame = Frame {
        bytes: &buf[..total],
        begin_string,
        msg_type,
        fields_start: type_end + 1,
        trailer_start,
    };
    Ok(Some((frame, total)))
}

/// Where the next message could start after a garbled one: the next "8=" that follows a SOH.
fn resync_point(buf: &[u8]) -> usize {
    let mut i = 1;
    while i + 2 <= buf.len() {
        if buf[i - 1] == SOH && buf[i] == b'8' && buf[i + 1] == b'=' {
            return i;
        }
        i += 1;
    }
    // Keep a last byte that may be the start of the next message.
    if buf.last() == Some(&SOH) || buf.last() == Some(&b'8') {
        buf.len() - 1
    } else {
        buf.len()
    }
    .max(1)
}

/// The first SOH in `buf[from..from + within + 1]`.
fn find_soh(buf: &[u8], from: usize, within: usize) -> Option<usize> {
    let end = (from + within + 1).min(buf.len());
    buf.get(from..end)?
        .iter()
        .position(|&b| b == SOH)
        .map(|p| from + p)
}

/// The FIX checksum: the byte sum modulo 256.
pub fn checksum(bytes: &[u8]) -> u8 {
    // Only the sum modulo 256 counts, so sixteen byte lanes may wrap freely: the compiler
    // turns the inner loop into one vector add per sixteen bytes, with no widening.
    let mut lanes = [0u8; 16];
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        for (lane, &b) in lanes.iter_mut().zip(chunk) {
            *lane = lane.wrapping_add(b);
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(0u8, |s, &b| s.wrapping_add(b));
    lanes.iter().fold(tail, |s, &b| s.wrapping_add(b))
}

/// A non-negative decimal integer of at most 18 digits, with no sign and no leading '+'.
pub fn parse_uint(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(d - b'0');
    }
    Some(n)
}

/// A decimal integer with an optional leading '-', at most 18 digits.
pub fn parse_int(text: &[u8]) -> Option<i64> {
    match text.split_first() {
        Some((b'-', digits)) => parse_uint(digits).map(|n| -(n as i64)),
        _ => parse_uint(text).map(|n| n as i64),
    }
}

impl<'a> Frame<'a> {
    /// The fields after MsgType, up to the checksum (header fields included).
    pub fn fields(&self) -> Fields<'a> {
        Fields {
            bytes: &self.bytes[..self.trailer_start],
            pos: self.fields_start,
        }
    }

    /// The value of the first field with this tag (a linear scan: for the session layer's
    /// few lookups; hot paths decode in one pass with [`Frame::fields`]).
    pub fn get(&self, tag: u32) -> Option<&'a [u8]> {
        self.fields()
            .filter_map(Result::ok)
            .find(|f| f.tag == tag)
            .map(|f| f.value)
    }

    /// The body between MsgType and the trailer, for the message store.
    pub fn body_after_msg_type(&self) -> &'a [u8] {
        &self.bytes[self.fields_start..self.trailer_start]
    }

    /// The whole message as text with '|' for SOH, for logs.
    pub fn display(&self) -> String {
        display(self.bytes)
    }
}

/// Renders FIX bytes with '|' for SOH, for logs and errors.
pub fn display(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace('\u{1}', "|")
}

/// Walks `tag=value<SOH>` fields. After an error it stops (the rest cannot be trusted).
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    bytes: &'a [u8],
    pos: usize,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Eight bytes from `at` as one word, when there are eight.
#[inline]
fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let chunk = bytes.get(at..at + 8)?;
    let mut word = [0u8; 8];
    word.copy_from_slice(chunk);
    Some(u64::from_le_bytes(word))
}

/// The high bit of every byte of `word` that equals `byte` (exact: no carries between bytes).
#[inline]
fn bytes_equal(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    !(((x & !HIGH_BITS) + !HIGH_BITS) | x) & HIGH_BITS
}

/// The first SOH at or after `from`, eight bytes at a time: a value usually ends within the
/// first word, so the loop's exit is one well-predicted branch instead of a byte loop's.
#[inline]
fn next_soh(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(word) = word_at(bytes, at) {
        let hits = bytes_equal(word, SOH);
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes
        .get(at..)?
        .iter()
        .position(|&b| b == SOH)
        .map(|p| at + p)
}

/// The tag at `at` and where its value starts, for tags of 1 to 7 digits read as one word.
#[inline]
fn short_tag(bytes: &[u8], at: usize) -> Option<(u32, usize)> {
    let word = word_at(bytes, at)?;
    let equals = bytes_equal(word, b'=');
    let digits = (equals.trailing_zeros() / 8) as usize; // 8 when there is no '='
    if digits == 0 || digits > 7 {
        return None;
    }
    let mut tag = 0u32;
    for k in 0..digits {
        let digit = ((word >> (8 * k)) as u8).wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        tag = tag * 10 + u32::from(digit);
    }
    Some((tag, at + digits + 1))
}

impl<'a> Fields<'a> {
    /// Walks the fields of any `tag=value<SOH>` run (a stored message body, for example).
    pub fn over(bytes: &'a [u8]) -> Fields<'a> {
        Fields { bytes, pos: 0 }
    }

    /// The slow path: a tag near the end of the bytes, a long one, or a malformed one.
    fn long_tag(&self) -> Option<(u32, usize)> {
        let bytes = self.bytes;
        let mut tag: u32 = 0;
        let mut i = self.pos;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            if i - self.pos >= 9 {
                return None;
            }
            tag = tag * 10 + u32::from(bytes[i] - b'0');
            i += 1;
        }
        if i == self.pos || i >= bytes.len() || bytes[i] != b'=' {
            return None;
        }
        Some((tag, i + 1))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, FieldError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.bytes;
        if self.pos >= bytes.len() {
            return None;
        }
        let tag = short_tag(bytes, self.pos).or_else(|| self.long_tag());
        let Some((tag, value_start)) = tag.filter(|&(tag, _)| tag != 0) else {
            self.pos = bytes.len();
            return Some(Err(FieldError::InvalidTag));
        };
        let Some(end) = next_soh(bytes, value_start) else {
            self.pos = bytes.len();
            return Some(Err(FieldError::NoValue(tag)));
        };
        self.pos = end + 1;
        if end == value_start {
            return Some(Err(FieldError::NoValue(tag)));
        }
        Some(Ok(Field {
            tag,
            value: &bytes[value_start..end],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> Vec<u8> {
        let body = body.replace('|', "\u{1}");
        let head = format!("8=FIX.4.4\u{1}9={}\u{1}", body.len());
        let mut out = format!("{head}{body}").into_bytes();
        let sum = checksum(&out);
        out.extend_from_slice(format!("10={sum:03}\u{1}").as_bytes());
        out
    }

    #[test]
    fn a_good_message_is_found_and_walked() {
        let bytes = message("35=0|34=2|49=A|56=B|52=20261122-10:00:00.000|");
        let (frame, len) = next_frame(&bytes, 4096).unwrap().unwrap();
        assert_eq!(len, bytes.len());
        assert_eq!(frame.msg_type, b"0");
        assert_eq!(frame.begin_string, b"FIX.4.4");
        let tags: Vec<u32> = frame.fields().map(|f| f.unwrap().tag).collect();
        assert_eq!(tags, vec![34, 49, 56, 52]);
        assert_eq!(frame.get(49), Some(&b"A"[..]));
    }

    #[test]
    fn every_prefix_asks_for_more() {
        let bytes = message("35=0|34=2|49=A|56=B|");
        for cut in 0..bytes.len() {
            assert_eq!(next_frame(&bytes[..cut], 4096), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn a_wrong_checksum_skips_exactly_the_message() {
        let mut bytes = message("35=0|34=2|49=A|56=B|");
        let n = bytes.len();
        bytes[n - 2] = if bytes[n - 2] == b'0' { b'1' } else { b'0' };
        let good = message("35=0|34=3|49=A|56=B|");
        bytes.extend_from_slice(&good);
        let err = next_frame(&bytes, 4096).unwrap_err();
        assert_eq!(err.skip, n);
        assert!(next_frame(&bytes[err.skip..], 4096).unwrap().is_some());
    }

    #[test]
    fn garbage_before_a_message_is_skipped_to_it() {
        let mut bytes = b"xx\x0158=junk\x01".to_vec();
        let good = message("35=0|34=3|49=A|56=B|");
        bytes.extend_from_slice(&good);
        let mut buf = &bytes[..];
        loop {
            match next_frame(buf, 4096) {
                Ok(Some((frame, _))) => {
                    assert_eq!(frame.get(34), Some(&b"3"[..]));
                    break;
                }
                Ok(None) => panic!("the good message was not found"),
                Err(g) => buf = &buf[g.skip..],
            }
        }
    }

    #[test]
    fn a_wrong_body_length_is_garbled() {
        let body = "35=0\u{1}34=2\u{1}";
        let mut bytes = format!("8=FIX.4.4\u{1}9={}\u{1}{body}", body.len() + 3).into_bytes();
        let sum = checksum(&bytes);
        bytes.extend_from_slice(format!("10={sum:03}\u{1}").as_bytes());
        bytes.extend_from_slice(b"xxxxxxxxxx");
        assert!(next_frame(&bytes, 4096).is_err());
    }

    #[test]
    fn bad_fields_are_reported() {
        let mut f = Fields::over(b"34=1\x01x=2\x01");
        assert!(f.next().unwrap().is_ok());
        assert_eq!(f.next(), Some(Err(FieldError::InvalidTag)));
        assert_eq!(f.next(), None);
        let mut f = Fields::over(b"58=\x01");
        assert_eq!(f.next(), Some(Err(FieldError::NoValue(58))));
    }

    #[test]
    fn word_helpers_find_exact_bytes() {
        for value in 0..=255u8 {
            let mut bytes = [value; 8];
            bytes[5] = SOH;
            let word = u64::from_le_bytes(bytes);
            let hits = bytes_equal(word, SOH);
            let expected = if value == SOH { 0xFF } else { 1 << 5 };
            let got: u8 = (0..8)
                .map(|k| (((hits >> (8 * k + 7)) & 1) as u8) << k)
                .sum();
            assert_eq!(got, expected, "byte {value}");
        }
        assert_eq!(next_soh(b"abcdefghijklmnop\x01", 3), Some(16));
        assert_eq!(next_soh(b"ab\x01", 0), Some(2));
        assert_eq!(next_soh(b"abcdefghijkl", 0), None);
        assert_eq!(short_tag(b"35=D\x01xxxx", 0), Some((35, 3)));
        assert_eq!(short_tag(b"1234567=x\x01", 0), Some((1_234_567, 8)));
        assert_eq!(short_tag(b"12345678=x\x01", 0), None);
        assert_eq!(short_tag(b"3a=D\x01xxxx", 0), None);
    }

    #[test]
    fn checksum_is_the_byte_sum_modulo_256() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 167 + 13) as u8).collect();
        for len in 0..bytes.len() {
            let naive: u32 = bytes[..len].iter().map(|&b| u32::from(b)).sum();
            assert_eq!(checksum(&bytes[..len]), naive as u8, "length {len}");
        }
    }

    #[test]
    fn integers() {
        assert_eq!(parse_int(b"-12"), Some(-12));
        assert_eq!(parse_int(b"+12"), None);
        assert_eq!(parse_uint(b"007"), Some(7));
        assert_eq!(parse_uint(b""), None);
        assert_eq!(parse_uint(b"1234567890123456789"), None);
    }
}
