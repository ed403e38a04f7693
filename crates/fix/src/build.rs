//! Writing FIX messages straight into a send buffer.
//!
//! ```
//! use rialto_fix::{MessageWriter, tags};
//! let mut out = Vec::new();
//! let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", b"0");
//! w.str(tags::SENDER_COMP_ID, b"RIALTO");
//! w.uint(tags::MSG_SEQ_NUM, 7);
//! w.finish();
//! assert!(out.starts_with(b"8=FIX.4.4\x019=20\x0135=0\x01"));
//! ```

use crate::decimal::Decimal;
use crate::parse::checksum;
use crate::{SOH, Version, time};

/// Room left for the BodyLength digits: three fit most messages; a longer body moves right.
const LENGTH_DIGITS: usize = 3;
/// What a message needs at most in one go before `finish` (avoids growing field by field).
const TYPICAL_MESSAGE: usize = 512;

/// Appends one message to a buffer. Fields go in the order they are written; [`finish`]
/// fills in BodyLength and appends the CheckSum.
///
/// [`finish`]: MessageWriter::finish
pub struct MessageWriter<'b> {
    buf: &'b mut Vec<u8>,
    start: usize,
    length_at: usize,
}

impl<'b> MessageWriter<'b> {
    /// Starts a message at the end of `buf`: BeginString, BodyLength (filled in later), MsgType.
    pub fn begin(buf: &'b mut Vec<u8>, begin_string: &[u8], msg_type: &[u8]) -> Self {
        let start = buf.len();
        buf.reserve(TYPICAL_MESSAGE);
        buf.extend_from_slice(b"8=");
        buf.extend_from_slice(begin_string);
        buf.extend_from_slice(b"\x019=");
        let length_at = buf.len();
        buf.extend_from_slice(&[b'0'; LENGTH_DIGITS]);
        buf.extend_from_slice(b"\x0135=");
        buf.extend_from_slice(msg_type);
        buf.push(SOH);
        MessageWriter {
            buf,
            start,
            length_at,
        }
    }

    /// Fixed-size copies compile to plain stores; most tags have 2 to 4 digits.
    #[inline]
    fn tag(&mut self, tag: u32) {
        let d = |n: u32| b'0' + (n % 10) as u8;
        match tag {
            0..=9 => self.buf.extend_from_slice(&[d(tag), b'=']),
            10..=99 => self.buf.extend_from_slice(&[d(tag / 10), d(tag), b'=']),
            100..=999 => self
                .buf
                .extend_from_slice(&[d(tag / 100), d(tag / 10), d(tag), b'=']),
            1000..=9999 => self.buf.extend_from_slice(&[
                d(tag / 1000),
                d(tag / 100),
                d(tag / 10),
                d(tag),
                b'=',
            ]),
            _ => {
                push_uint(self.buf, u64::from(tag));
                self.buf.push(b'=');
            }
        }
    }

    #[inline]
    pub fn str(&mut self, tag: u32, value: &[u8]) -> &mut Self {
        self.tag(tag);
        push_short(self.buf, value);
        self.buf.push(SOH);
        self
    }

    pub fn char(&mut self, tag: u32, value: u8) -> &mut Self {
        self.tag(tag);
        self.buf.push(value);
        self.buf.push(SOH);
        self
    }

    pub fn uint(&mut self, tag: u32, value: u64) -> &mut Self {
        self.tag(tag);
        push_uint(self.buf, value);
        self.buf.push(SOH);
        self
    }

    pub fn int(&mut self, tag: u32, value: i64) -> &mut Self {
        self.tag(tag);
        if value < 0 {
            self.buf.push(b'-');
        }
        push_uint(self.buf, value.unsigned_abs());
        self.buf.push(SOH);
        self
    }

    pub fn bool(&mut self, tag: u32, value: bool) -> &mut Self {
        self.char(tag, if value { b'Y' } else { b'N' })
    }

    pub fn decimal(&mut self, tag: u32, value: Decimal) -> &mut Self {
        self.tag(tag);
        value.write(self.buf);
        self.buf.push(SOH);
        self
    }

    /// A UTCTimestamp with milliseconds (FIX 4.2 and later).
    pub fn timestamp(&mut self, tag: u32, unix_ns: i64) -> &mut Self {
        self.tag(tag);
        time::write_utc_timestamp(self.buf, unix_ns);
        self.buf.push(SOH);
        self
    }

    /// A UTCTimestamp as `version` defines it: to the second in FIX 4.0 and 4.1 (they have no
    /// fraction), with milliseconds from FIX 4.2 on.
    pub fn timestamp_in(&mut self, version: Version, tag: u32, unix_ns: i64) -> &mut Self {
        if version >= Version::Fix42 {
            return self.timestamp(tag, unix_ns);
        }
        self.tag(tag);
        time::write_utc_timestamp_seconds(self.buf, unix_ns);
        self.buf.push(SOH);
        self
    }

    /// Copies already-encoded `tag=value<SOH>` fields (a stored body on resend).
    pub fn raw(&mut self, fields: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(fields);
        self
    }

    /// Fills in BodyLength, appends the CheckSum, and returns the message's length.
    pub fn finish(self) -> usize {
        let body_start = self.length_at + LENGTH_DIGITS + 1;
        let body_len = self.buf.len() - body_start;
        let n = digit_count(body_len as u64);
        if n < LENGTH_DIGITS {
            // Move the body left over the unused digit slots.
            let shift = LENGTH_DIGITS - n;
            self.buf
                .copy_within(self.length_at + LENGTH_DIGITS.., self.length_at + n);
            self.buf.truncate(self.buf.len() - shift);
        } else if n > LENGTH_DIGITS {
            // A long body: make room for the extra digits.
            let grow = n - LENGTH_DIGITS;
            let old_len = self.buf.len();
            self.buf.resize(old_len + grow, 0);
            self.buf
                .copy_within(self.length_at + LENGTH_DIGITS..old_len, self.length_at + n);
        }
        put_digits_ending(self.buf, self.length_at + n, body_len as u64);
        let sum = checksum(&self.buf[self.start..]);
        self.buf.extend_from_slice(b"10=");
        self.buf
            .extend_from_slice(&[b'0' + sum / 100, b'0' + sum / 10 % 10, b'0' + sum % 10, SOH]);
        self.buf.len() - self.start
    }
}

/// "00" to "99": two digits per division.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// How many decimal digits `n` has.
#[inline]
pub(crate) fn digit_count(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Writes the digits of `n` so that the last one lands at `out[end - 1]`.
#[inline(always)]
pub(crate) fn put_digits_ending(out: &mut [u8], mut end: usize, mut n: u64) {
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        end -= 2;
        out[end] = PAIRS[pair];
        out[end + 1] = PAIRS[pair + 1];
    }
    if n >= 10 {
        let pair = n as usize * 2;
        out[end - 2] = PAIRS[pair];
        out[end - 1] = PAIRS[pair + 1];
    } else {
        out[end - 1] = b'0' + n as u8;
    }
}

/// Appends `n` in decimal. A block of 20 placeholder bytes is appended whole (a constant
/// copy, no call to memcpy), the digits are written over its front where they lie, and the
/// rest is cut. Writing the digits into a stack array and copying that would read back bytes
/// just stored one at a time, which the processor cannot forward to a wide load: a stall.
#[inline]
pub(crate) fn push_uint(buf: &mut Vec<u8>, n: u64) {
    let start = buf.len();
    let len = digit_count(n);
    buf.extend_from_slice(&[b'0'; 20]);
    put_digits_ending(&mut buf[start..], len, n);
    buf.truncate(start + len);
}

/// Appends a short slice byte by byte: cheaper than a call to memcpy for a few bytes (side,
/// type, status); longer values are copied.
#[inline]
pub(crate) fn push_short(buf: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() <= 4 {
        for &b in bytes {
            buf.push(b);
        }
    } else {
        buf.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::next_frame;
    use crate::tags;

    #[test]
    fn what_is_written_parses_back() {
        let mut out = b"leftover".to_vec();
        let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", b"8");
        w.str(tags::SENDER_COMP_ID, b"RIALTO")
            .uint(tags::MSG_SEQ_NUM, 12)
            .int(tags::PRICE, -5)
            .decimal(tags::CUM_QTY, Decimal::new(1234, 3))
            .timestamp(tags::SENDING_TIME, 1_795_000_000_123_000_000)
            .bool(tags::POSS_DUP_FLAG, true);
        let len = w.finish();
        assert_eq!(len, out.len() - 8);
        let (frame, n) = next_frame(&out[8..], 4096).unwrap().unwrap();
        assert_eq!(n, len);
        assert_eq!(frame.msg_type, b"8");
        assert_eq!(frame.get(tags::PRICE), Some(&b"-5"[..]));
        assert_eq!(frame.get(tags::CUM_QTY), Some(&b"1.234"[..]));
        assert_eq!(frame.get(tags::POSS_DUP_FLAG), Some(&b"Y"[..]));
    }

    #[test]
    fn every_body_length_is_written_right() {
        for text_len in 0..1200 {
            let mut out = b"x".to_vec();
            let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", b"0");
            if text_len > 0 {
                w.str(tags::TEXT, &vec![b'y'; text_len]);
            }
            let len = w.finish();
            let (frame, n) = next_frame(&out[1..], 4096).unwrap().unwrap();
            assert_eq!(n, len, "text of {text_len}");
            assert_eq!(frame.get(tags::TEXT).map_or(0, <[u8]>::len), text_len);
        }
    }

    #[test]
    fn long_bodies_keep_their_length_right() {
        let mut out = Vec::new();
        let mut w = MessageWriter::begin(&mut out, b"FIXT.1.1", b"B");
        w.str(tags::TEXT, &vec![b'x'; 100_000]);
        w.finish();
        let (frame, _) = next_frame(&out, 1 << 20).unwrap().unwrap();
        assert_eq!(frame.get(tags::TEXT).unwrap().len(), 100_000);
    }
}
