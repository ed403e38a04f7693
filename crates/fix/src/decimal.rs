//! Exact decimals for FIX prices and quantities, and their conversion to ticks and lots.
//!
//! A value is `mantissa × 10^-scale`. Conversions never round: a price that is not a whole
//! number of ticks is an error, as is anything that does not fit in an `i64`.

use crate::build::{digit_count, put_digits_ending};

const POW10: [u64; 19] = {
    let mut p = [1u64; 19];
    let mut i = 1;
    while i < 19 {
        p[i] = p[i - 1] * 10;
        i += 1;
    }
    p
};

/// The most digits after the point that Rialto accepts.
pub const MAX_SCALE: u8 = 18;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal {
    pub mantissa: i64,
    pub scale: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    #[error("not a decimal number")]
    Format,
    #[error("not a whole multiple of the increment")]
    OffGrid,
    #[error("too large")]
    Overflow,
}

impl Decimal {
    pub const fn new(mantissa: i64, scale: u8) -> Decimal {
        Decimal { mantissa, scale }
    }

    /// Parses `-?digits(.digits)?` (FIX's float/Price/Qty format; no exponent, no '+').
    pub fn parse(text: &[u8]) -> Result<Decimal, DecimalError> {
        let (negative, digits) = match text.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, text),
        };
        if digits.is_empty() {
            return Err(DecimalError::Format);
        }
        if digits.len() <= 18 {
            Decimal::parse_short(negative, digits)
        } else {
            Decimal::parse_long(negative, digits)
        }
    }

    /// [`Decimal::parse`] after the sign, with every step checked.
    fn parse_long(negative: bool, digits: &[u8]) -> Result<Decimal, DecimalError> {
        let mut mantissa: i64 = 0;
        let mut scale: u8 = 0;
        let mut seen_point = false;
        let mut seen_digit = false;
        for &b in digits {
            match b {
                b'0'..=b'9' => {
                    seen_digit = true;
                    mantissa = mantissa
                        .checked_mul(10)
                        .and_then(|m| m.checked_add(i64::from(b - b'0')))
                        .ok_or(DecimalError::Overflow)?;
                    if seen_point {
                        scale += 1;
                        if scale > MAX_SCALE {
                            return Err(DecimalError::Overflow);
                        }
                    }
                }
                b'.' if !seen_point => seen_point = true,
                _ => return Err(DecimalError::Format),
            }
        }
        if !seen_digit {
            return Err(DecimalError::Format);
        }
        Ok(Decimal {
            mantissa: if negative { -mantissa } else { mantissa },
            scale,
        })
    }

    /// [`Decimal::parse`] of at most 18 characters (digits and a point): they cannot
    /// overflow an `i64`, so the loop needs no checked arithmetic.
    #[inline]
    fn parse_short(negative: bool, digits: &[u8]) -> Result<Decimal, DecimalError> {
        let mut mantissa: i64 = 0;
        let mut point_at = None;
        for (i, &b) in digits.iter().enumerate() {
            let digit = b.wrapping_sub(b'0');
            if digit <= 9 {
                mantissa = mantissa * 10 + i64::from(digit);
            } else if b == b'.' && point_at.is_none() {
                point_at = Some(i);
            } else {
                return Err(DecimalError::Format);
            }
        }
        let scale = point_at.map_or(0, |at| digits.len() - at - 1);
        if point_at.is_some() && digits.len() == 1 {
            return Err(DecimalError::Format);
        }
        Ok(Decimal {
            mantissa: if negative { -mantissa } else { mantissa },
            scale: scale as u8,
        })
    }

    /// How many `increment`s make this value, exactly.
    pub fn to_units(self, increment: Decimal) -> Result<i64, DecimalError> {
        if increment.mantissa <= 0 {
            return Err(DecimalError::OffGrid);
        }
        let scale = self.scale.max(increment.scale);
        let value = widen(self.mantissa, scale - self.scale)?;
        let step = widen(increment.mantissa, scale - increment.scale)?;
        if value % step != 0 {
            return Err(DecimalError::OffGrid);
        }
        i64::try_from(value / step).map_err(|_| DecimalError::Overflow)
    }

    /// `units × increment`.
    pub fn from_units(units: i64, increment: Decimal) -> Result<Decimal, DecimalError> {
        let mantissa = units
            .checked_mul(increment.mantissa)
            .ok_or(DecimalError::Overflow)?;
        Ok(Decimal {
            mantissa,
            scale: increment.scale,
        })
    }

    /// Writes the value with exactly `scale` digits after the point.
    pub fn write(self, buf: &mut Vec<u8>) {
        // A block of '0's (the fraction's leading zeros) is appended whole, the text is
        // written over it where it lies, and the rest is cut: plain stores, no call to memcpy,
        // and nothing stored byte by byte is read back at once (see `push_uint`).
        const BLOCK: usize = 1 + 19 + 1 + MAX_SCALE as usize;
        let start = buf.len();
        buf.extend_from_slice(&[b'0'; BLOCK]);
        let text = &mut buf[start..];
        let magnitude = self.mantissa.unsigned_abs();
        let scale = usize::from(self.scale.min(MAX_SCALE));
        let mut len = 0;
        if self.mantissa < 0 {
            text[0] = b'-';
            len = 1;
        }
        if scale == 0 {
            len += digit_count(magnitude);
            put_digits_ending(text, len, magnitude);
        } else {
            let (whole, fraction) = split(magnitude, scale);
            len += digit_count(whole);
            put_digits_ending(text, len, whole);
            text[len] = b'.';
            len += 1 + scale;
            if fraction > 0 {
                put_digits_ending(text, len, fraction);
            }
        }
        buf.truncate(start + len);
    }

    /// A weighted average `total / qty`, rounded half away from zero to `scale` digits (AvgPx
    /// is the one figure FIX reports that cannot always be exact).
    pub fn ratio(total: i128, qty: i128, scale: u8) -> Decimal {
        if qty == 0 {
            return Decimal::new(0, scale);
        }
        let scaled = total * 10i128.pow(u32::from(scale));
        let q = scaled / qty;
        let r = scaled % qty;
        let q = if 2 * r.abs() >= qty.abs() {
            q + scaled.signum() * qty.signum()
        } else {
            q
        };
        Decimal::new(q.clamp(i64::MIN as i128, i64::MAX as i128) as i64, scale)
    }
}

/// `(magnitude / 10^scale, magnitude % 10^scale)`. The usual scales divide by constants,
/// which compile to multiplications instead of a slow division.
#[inline]
fn split(magnitude: u64, scale: usize) -> (u64, u64) {
    macro_rules! by {
        ($d:expr) => {
            (magnitude / $d, magnitude % $d)
        };
    }
    match scale {
        1 => by!(10),
        2 => by!(100),
        3 => by!(1_000),
        4 => by!(10_000),
        5 => by!(100_000),
        6 => by!(1_000_000),
        7 => by!(10_000_000),
        8 => by!(100_000_000),
        _ => by!(POW10[scale]),
    }
}

fn widen(mantissa: i64, by: u8) -> Result<i128, DecimalError> {
    10i128
        .checked_pow(u32::from(by))
        .and_then(|p| i128::from(mantissa).checked_mul(p))
        .ok_or(DecimalError::Overflow)
}

impl std::fmt::Display for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut buf = Vec::new();
        self.write(&mut buf);
        f.write_str(&String::from_utf8_lossy(&buf))
    }
}

impl std::str::FromStr for Decimal {
    type Err = DecimalError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Decimal::parse(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn parse_and_write_round_trip() {
        for s in [
            "0",
            "1",
            "-1",
            "100.25",
            "0.001",
            "-0.50",
            "123456789.123456789",
        ] {
            assert_eq!(d(s).to_string(), s);
        }
        for bad in ["", "-", ".", "1.2.3", "1e5", "+1", "abc", "1,5"] {
            assert!(Decimal::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        assert_eq!(
            Decimal::parse(b"99999999999999999999"),
            Err(DecimalError::Overflow)
        );
    }

    #[test]
    fn the_short_parse_agrees_with_the_checked_one() {
        let alphabet = b"0123456789.-x";
        let mut state = 7u64;
        for _ in 0..200_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (state >> 59) as usize % 18 + 1;
            let text: Vec<u8> = (0..len)
                .map(|i| alphabet[(state >> (i * 3 % 56)) as usize % alphabet.len()])
                .collect();
            assert_eq!(
                Decimal::parse_short(false, &text),
                Decimal::parse_long(false, &text),
                "{}",
                String::from_utf8_lossy(&text)
            );
        }
    }

    #[test]
    fn units_are_exact() {
        assert_eq!(d("100.25").to_units(d("0.01")), Ok(10025));
        assert_eq!(d("100.250000").to_units(d("0.01")), Ok(10025));
        assert_eq!(d("100.005").to_units(d("0.01")), Err(DecimalError::OffGrid));
        assert_eq!(d("0.005").to_units(d("0.001")), Ok(5));
        assert_eq!(d("10").to_units(d("5")), Ok(2));
        assert_eq!(d("12").to_units(d("5")), Err(DecimalError::OffGrid));
        assert_eq!(d("-1.5").to_units(d("0.5")), Ok(-3));
        assert_eq!(
            d("999999999999999999").to_units(d("0.000000001")),
            Err(DecimalError::Overflow)
        );
        assert_eq!(
            Decimal::from_units(10025, d("0.01")).unwrap().to_string(),
            "100.25"
        );
    }

    #[test]
    fn averages_round_half_away_from_zero() {
        assert_eq!(Decimal::ratio(10, 4, 1).to_string(), "2.5");
        assert_eq!(Decimal::ratio(2, 3, 2).to_string(), "0.67");
        assert_eq!(Decimal::ratio(1, 3, 2).to_string(), "0.33");
        assert_eq!(Decimal::ratio(0, 0, 2).to_string(), "0.00");
    }
}
