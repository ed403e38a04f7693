//! FIX UTCTimestamp (`YYYYMMDD-HH:MM:SS[.sss[sss[sss]]]`) to and from Unix nanoseconds.

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Appends the time with milliseconds. Times before 1970 are written as 1970 (an `i64` of
/// nanoseconds ends in 2262, well inside four year digits).
pub fn write_utc_timestamp(buf: &mut Vec<u8>, unix_ns: i64) {
    let ns = unix_ns.max(0);
    let secs = ns / 1_000_000_000;
    let millis = (ns % 1_000_000_000) / 1_000_000;
    // The date and time of day change once a second: messages in between reuse them.
    let text = LAST_SECOND.with(|last| {
        let (second, text) = last.get();
        if second == secs {
            return text;
        }
        let text = format_second(secs);
        last.set((secs, text));
        text
    });
    // The milliseconds go in after the copy, where they lie: changing them in `text` first
    // would have the copy read back bytes just stored one at a time (a stall).
    let start = buf.len();
    buf.extend_from_slice(&text);
    let millis_at = &mut buf[start + 18..start + 21];
    millis_at[0] = b'0' + (millis / 100) as u8;
    millis_at[1] = b'0' + (millis / 10 % 10) as u8;
    millis_at[2] = b'0' + (millis % 10) as u8;
}

/// Appends the time to the second, without a fraction: FIX 4.0 and 4.1 define UTCTimestamp as
/// `YYYYMMDD-HH:MM:SS` only.
pub fn write_utc_timestamp_seconds(buf: &mut Vec<u8>, unix_ns: i64) {
    let start = buf.len();
    write_utc_timestamp(buf, unix_ns);
    buf.truncate(start + 17);
}

thread_local! {
    /// The last second formatted on this thread, and its text.
    static LAST_SECOND: std::cell::Cell<(i64, [u8; 21])> = const { std::cell::Cell::new((-1, [0; 21])) };
}

fn format_second(secs: i64) -> [u8; 21] {
    let (year, month, day) = civil_from_days(secs / 86_400);
    let sod = secs % 86_400;
    let mut out = *b"00000000-00:00:00.000";
    let mut put = |at: usize, width: usize, mut v: i64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year);
    put(4, 2, i64::from(month));
    put(6, 2, i64::from(day));
    put(9, 2, sod / 3600);
    put(12, 2, sod / 60 % 60);
    put(15, 2, sod % 60);
    out
}

/// Parses a UTCTimestamp with 0, 3, 6 or 9 fraction digits. `None` if malformed or after
/// 2262-04-11 (the end of `i64` nanoseconds).
pub fn parse_utc_timestamp(text: &[u8]) -> Option<i64> {
    if text.len() < 17 || text[8] != b'-' || text[11] != b':' || text[14] != b':' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &b in &text[range] {
            if !b.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(b - b'0');
        }
        Some(v)
    };
    let (year, month, day) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hour, minute, second) = (num(9..11)?, num(12..14)?, num(15..17)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // 60 allows a leap second, as FIX does.
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let fraction_ns = match text.len() {
        17 => 0,
        21 | 24 | 27 if text[17] == b'.' => {
            let digits = text.len() - 18;
            num(18..text.len())? * 10i64.pow(9 - digits as u32)
        }
        _ => return None,
    };
    let days = days_from_civil(year, month as u32, day as u32);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    // Beyond 2262-04-11 the nanoseconds do not fit in an i64.
    secs.checked_mul(1_000_000_000)?.checked_add(fraction_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ns: i64) -> String {
        let mut buf = Vec::new();
        write_utc_timestamp(&mut buf, ns);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn known_times() {
        assert_eq!(text(0), "19700101-00:00:00.000");
        // 2026-11-22 04:44:29.123 UTC
        let ns = 1_795_322_669_123_000_000;
        assert_eq!(text(ns), "20261122-04:44:29.123");
        assert_eq!(parse_utc_timestamp(b"20261122-04:44:29.123"), Some(ns));
        assert_eq!(
            parse_utc_timestamp(b"20261122-04:44:29"),
            Some(ns - 123_000_000)
        );
        assert_eq!(
            parse_utc_timestamp(b"20261122-04:44:29.123456789"),
            Some(ns + 456_789)
        );
        assert_eq!(text(951_782_400_000_000_000), "20000229-00:00:00.000");
    }

    #[test]
    fn malformed_times() {
        for bad in [
            "2026112-04:44:29",
            "20261122 04:44:29",
            "20261322-04:44:29",
            "20261122-24:00:00",
            "20261122-04:44:29.12",
            "20261122-04:44:29.1234",
            "2026112a-04:44:29",
            // Well formed, but past the end of i64 nanoseconds.
            "99991231-23:59:59",
            "22620411-23:47:17",
        ] {
            assert_eq!(parse_utc_timestamp(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn round_trip_over_many_days() {
        let mut ns = 0i64;
        while ns < 4_102_444_800_000_000_000 {
            let t = text(ns);
            assert_eq!(parse_utc_timestamp(t.as_bytes()), Some(ns), "{t}");
            ns += 86_400_000_000_000 * 37 + 3_723_456_000_000;
        }
    }
}
