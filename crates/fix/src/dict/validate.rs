//! Checking a message against its dictionary, in one pass over its fields.
//!
//! The first problem found is returned as a [`Violation`] carrying the SessionRejectReason
//! (tag 373) and the tag at fault (371), ready for a session-level Reject. Problems are found
//! in field order; missing required fields are reported after the walk (header, body, trailer).
//!
//! Behaviour follows QuickFIX/J's defaults where it makes sense:
//! - a tag the dictionary does not know is reason 0 (invalid tag number), user-defined ones
//!   (5000 and above) included, unless [`Options::allow_user_defined_tags`] accepts those
//!   anywhere in the body (QuickFIX/J's `ValidateUserDefinedFields=N`);
//! - a repeating group's entries must start with the delimiter field and keep the
//!   dictionary's member order (reason 15), and the entry count must match NumInGroup (16);
//! - header fields after the body and anything after the trailer fields are reason 14.
//!
//! Data fields: a data field (e.g. RawData 96, EncodedText 355) may contain SOH. The validator
//! reads it by the length its length field (95, 354, ...) declares, so SOH inside data is
//! supported here. [`crate::Frame::fields`] and [`crate::Frame::get`] split at every SOH and
//! do not support it.

use crate::ApplVersion;
use crate::SOH;
use crate::parse::{Field, Frame, parse_int, parse_uint};

use super::{
    Dictionary, Entry, FieldDef, Group, Kind, MAX_SECTION, Message, Section, dictionaries,
};

/// SessionRejectReason (373) values: the session layer's.
pub use crate::session::reject_reason as reason;

/// Tags at and above this are user-defined: unknown ones are accepted when
/// [`Options::allow_user_defined_tags`] is set.
pub const USER_DEFINED_TAG_MIN: u32 = 5000;

/// What a session allows beyond its dictionary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Accept tags of 5000 and above that the dictionary does not define, anywhere in the
    /// body (`fix.allow_user_defined_tags`, default off: they are reason 0).
    pub allow_user_defined_tags: bool,
}

/// Why a message fails its dictionary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text} (SessionRejectReason {reason}, tag {ref_tag:?})")]
pub struct Violation {
    /// The SessionRejectReason (373), one of [`reason`].
    pub reason: u32,
    /// The tag at fault (RefTagID, 371), when there is one.
    pub ref_tag: Option<u32>,
    pub text: &'static str,
}

#[cold]
fn violation(reason: u32, ref_tag: Option<u32>, text: &'static str) -> Violation {
    Violation {
        reason,
        ref_tag,
        text,
    }
}

/// Checks `frame` against the dictionaries of `version`: every tag known (or user-defined),
/// defined for the message, present at most once, with a value of the right format and in
/// range; header, body and trailer in that order; repeating groups well formed; required
/// fields present.
///
/// A MsgType that `version` does not define is reason 11. One it defines but Rialto's
/// dictionaries do not cover ([`super::MsgTypeStatus::OutOfScope`]) has only its header,
/// trailer and tag numbers checked and returns `Ok`: the caller answers it with a
/// BusinessMessageReject (35=j, 380=3).
///
/// The caller chooses `version` from BeginString (on FIXT.1.1, from ApplVerID or the Logon's
/// DefaultApplVerID); it is not compared here.
pub fn validate(version: ApplVersion, frame: &Frame<'_>) -> Result<(), Violation> {
    validate_fields_with(version, frame, Options::default(), &mut ())
}

/// [`validate`] with `options`.
pub fn validate_with(
    version: ApplVersion,
    frame: &Frame<'_>,
    options: Options,
) -> Result<(), Violation> {
    validate_fields_with(version, frame, options, &mut ())
}

/// What [`validate_fields`] hands the fields to.
pub trait Visit<'a> {
    fn field(&mut self, field: Field<'a>);
}

/// Visits nothing: plain validation.
impl Visit<'_> for () {
    #[inline(always)]
    fn field(&mut self, _: Field<'_>) {}
}

/// [`validate`], handing each field after MsgType to `visit` once its value has passed its
/// checks, in message order, so that a decoder reads the message in the same pass. When the
/// result is `Ok`, `visit` has seen every field of the message.
pub fn validate_fields<'a, V: Visit<'a>>(
    version: ApplVersion,
    frame: &Frame<'a>,
    visit: &mut V,
) -> Result<(), Violation> {
    validate_fields_with(version, frame, Options::default(), visit)
}

/// [`validate_fields`] with `options`.
pub fn validate_fields_with<'a, V: Visit<'a>>(
    version: ApplVersion,
    frame: &Frame<'a>,
    options: Options,
    visit: &mut V,
) -> Result<(), Violation> {
    let (session, app) = dictionaries(version);
    let msg_type = frame.msg_type;
    let (body_dict, message) = if let Some(m) = session.message(msg_type) {
        (session, Some(m))
    } else if let Some(m) = app.message(msg_type) {
        (app, Some(m))
    } else if session.defines_msg_type(msg_type) || app.defines_msg_type(msg_type) {
        (app, None)
    } else {
        return Err(violation(
            reason::INVALID_MSG_TYPE,
            Some(crate::tags::MSG_TYPE),
            "Invalid MsgType",
        ));
    };
    let mut walk = Walk {
        session,
        app,
        body_dict,
        bytes: frame.body_after_msg_type(),
        pos: 0,
        field: END,
        declared_data: None,
        options,
        visit,
    };
    walk.message(message).map_err(Fault::violation)
}

/// The problems the walk can find, each with its SessionRejectReason and text.
#[derive(Clone, Copy, Debug)]
enum Problem {
    InvalidTag,
    UndefinedTag,
    NotForMsgType,
    NoValue,
    OutOfRange,
    BadFormat,
    BadDataLength,
    Repeated,
    RepeatedHeader,
    HeaderAfterBody,
    AfterTrailer,
    GroupOrder,
    GroupStart,
    WrongCount,
    Missing,
}

/// A problem and the tag at fault (0 for none: tag 0 is never a field's). Eight bytes, so that
/// the walk's results travel in registers; it becomes a [`Violation`] once, at the end.
#[derive(Clone, Copy, Debug)]
struct Fault {
    problem: Problem,
    tag: u32,
}

impl Fault {
    #[cold]
    fn violation(self) -> Violation {
        // The wording of QuickFIX/J's SessionRejectReasonText; the session adds ", field=N".
        let (reason, text) = match self.problem {
            Problem::InvalidTag | Problem::UndefinedTag => {
                (reason::INVALID_TAG_NUMBER, "Invalid tag number")
            }
            Problem::NotForMsgType => (
                reason::TAG_NOT_DEFINED_FOR_MSG_TYPE,
                "Tag not defined for this message type",
            ),
            Problem::NoValue => (reason::TAG_WITHOUT_VALUE, "Tag specified without a value"),
            Problem::OutOfRange => (
                reason::VALUE_INCORRECT,
                "Value is incorrect (out of range) for this tag",
            ),
            Problem::BadFormat | Problem::BadDataLength => (
                reason::INCORRECT_DATA_FORMAT,
                "Incorrect data format for value",
            ),
            Problem::Repeated | Problem::RepeatedHeader => (
                reason::TAG_APPEARS_MORE_THAN_ONCE,
                "Tag appears more than once",
            ),
            Problem::HeaderAfterBody | Problem::AfterTrailer => (
                reason::TAG_OUT_OF_ORDER,
                "Tag specified out of required order",
            ),
            Problem::GroupOrder | Problem::GroupStart => (
                reason::REPEATING_GROUP_FIELDS_OUT_OF_ORDER,
                "Repeating group fields out of order",
            ),
            Problem::WrongCount => (
                reason::INCORRECT_NUM_IN_GROUP,
                "Incorrect NumInGroup count for repeating group",
            ),
            Problem::Missing => (reason::REQUIRED_TAG_MISSING, "Required tag missing"),
        };
        violation(reason, (self.tag != 0).then_some(self.tag), text)
    }
}

/// `Err` of a problem with a tag, kept off the hot path.
#[cold]
#[inline(never)]
fn fault<T>(problem: Problem, tag: u32) -> Result<T, Fault> {
    Err(Fault { problem, tag })
}

/// Which entries of a section have been seen, by position. Sections have at most
/// [`MAX_SECTION`] entries (checked when the tables are built); a position beyond that is never
/// marked, so it cannot panic.
struct Seen([u64; MAX_SECTION / 64]);

impl Seen {
    #[inline]
    fn new() -> Seen {
        Seen([0; MAX_SECTION / 64])
    }

    #[inline]
    fn set(&mut self, i: usize) {
        if let Some(word) = self.0.get_mut(i / 64) {
            *word |= 1 << (i % 64);
        }
    }

    #[inline]
    fn has(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
}

/// What [`Walk::advance`] leaves as the current field when the fields run out (tag 0 is
/// never a field's: `advance` rejects it).
const END: Field<'static> = Field { tag: 0, value: &[] };

/// One pass over the fields. The current field is always one read ahead: a section stops at
/// the first field that does not belong to it and leaves it current for the section around
/// it, so nothing is read twice.
struct Walk<'a, 'v, V> {
    session: &'static Dictionary,
    app: &'static Dictionary,
    /// The one of the two that defines the message.
    body_dict: &'static Dictionary,
    /// The fields after MsgType, up to the CheckSum.
    bytes: &'a [u8],
    /// Where the field after the current one starts.
    pos: usize,
    /// The current field, or [`END`].
    field: Field<'a>,
    /// The data field and its length announced by the last length field.
    declared_data: Option<(u32, usize)>,
    options: Options,
    /// Given each field whose value passed.
    visit: &'v mut V,
}

impl<'a, V: Visit<'a>> Walk<'a, '_, V> {
    fn message(&mut self, message: Option<&'static Message>) -> Result<(), Fault> {
        let session = self.session;
        // BeginString, BodyLength and MsgType were checked when the frame was found.
        let mut header_seen = Seen(session.header.framing());
        self.advance()?;
        self.section(session, &session.header, &mut header_seen, None)?;

        let mut body_seen = Seen::new();
        loop {
            if let Some(m) = message {
                self.section(self.body_dict, &m.body, &mut body_seen, None)?;
            }
            let tag = self.field.tag;
            if tag == END.tag || session.trailer.position(tag).is_some() {
                break;
            }
            if let Some(i) = session.header.position(tag) {
                let problem = if header_seen.has(i) {
                    Problem::RepeatedHeader
                } else {
                    Problem::HeaderAfterBody
                };
                return fault(problem, tag);
            }
            self.stray(message.is_none())?;
            self.advance()?;
        }

        // So was CheckSum.
        let mut trailer_seen = Seen(session.trailer.framing());
        self.section(session, &session.trailer, &mut trailer_seen, None)?;
        if self.field.tag != END.tag {
            return fault(Problem::AfterTrailer, self.field.tag);
        }

        required(&session.header, &header_seen)?;
        if let Some(m) = message {
            required(&m.body, &body_seen)?;
        }
        required(&session.trailer, &trailer_seen)
    }

    /// The current field, in the body but not in the message: fine if user-defined, or if
    /// the message type is out of scope (then only the tag number is checked).
    #[cold]
    fn stray(&mut self, out_of_scope: bool) -> Result<(), Fault> {
        let tag = self.field.tag;
        let defined = self.session.defines_tag(tag) || self.app.defines_tag(tag);
        if !defined {
            if tag >= USER_DEFINED_TAG_MIN && self.options.allow_user_defined_tags {
                self.visit.field(self.field);
                return Ok(());
            }
            return fault(Problem::UndefinedTag, tag);
        }
        if out_of_scope {
            // Length fields still announce their data, so SOH inside data is read right.
            let tag = self.field.tag;
            let def = self
                .body_dict
                .field(tag)
                .or_else(|| self.session.field(tag));
            return self.value(def);
        }
        fault(Problem::NotForMsgType, tag)
    }

    /// Reads the fields of one section (header, body, trailer or one group entry) from the
    /// current one on, and stops at the first that does not belong ([`END`] if none is left).
    /// In a group entry (`group` is set) members must keep the dictionary order, and the
    /// delimiter ends the entry.
    fn section(
        &mut self,
        dict: &'static Dictionary,
        section: &Section,
        seen: &mut Seen,
        group: Option<&Group>,
    ) -> Result<(), Fault> {
        let mut last: Option<usize> = group.map(|_| 0);
        let delimiter = group.map_or(END.tag, |g| g.delimiter);
        loop {
            let tag = self.field.tag;
            if tag == END.tag {
                return Ok(());
            }
            let Some(i) = section.position(tag) else {
                return Ok(());
            };
            if let Some(last_i) = last {
                if tag == delimiter {
                    return Ok(());
                }
                if i <= last_i {
                    return fault(Problem::GroupOrder, tag);
                }
                last = Some(i);
            } else if seen.has(i) {
                return fault(Problem::Repeated, tag);
            }
            seen.set(i);
            let entry = section.entries.get(i);
            self.value(entry.and_then(|e| dict.fields.get(usize::from(e.def))))?;
            match entry {
                Some(&Entry { group: Some(g), .. }) => self.group(dict, g)?,
                _ => self.advance()?,
            }
        }
    }

    /// Reads the entries of a repeating group whose NumInGroup field is current, and stops
    /// at the field after them.
    fn group(&mut self, dict: &'static Dictionary, index: u16) -> Result<(), Fault> {
        let Some(group) = dict.group(index) else {
            return self.advance();
        };
        // The value was format-checked as NumInGroup already.
        let declared = parse_uint(self.field.value).unwrap_or(0);
        let mut entries: u64 = 0;
        self.advance()?;
        loop {
            let tag = self.field.tag;
            if tag == END.tag {
                break;
            }
            if tag == group.delimiter {
                entries += 1;
                if entries > declared {
                    return fault(Problem::WrongCount, group.count_tag);
                }
                let mut seen = Seen::new();
                // The delimiter is always the first member.
                seen.set(0);
                let first = group.members.entries.first();
                self.value(first.and_then(|e| dict.fields.get(usize::from(e.def))))?;
                match first {
                    Some(&Entry { group: Some(g), .. }) => self.group(dict, g)?,
                    _ => self.advance()?,
                }
                self.section(dict, &group.members, &mut seen, Some(group))?;
                required(&group.members, &seen)?;
            } else if entries == 0 && group.members.position(tag).is_some() {
                return fault(Problem::GroupStart, tag);
            } else {
                break;
            }
        }
        if entries != declared {
            return fault(Problem::WrongCount, group.count_tag);
        }
        Ok(())
    }

    /// Checks the current field's value, and hands the field to `visit` if it passes.
    #[inline(always)]
    fn value(&mut self, def: Option<&'static FieldDef>) -> Result<(), Fault> {
        self.check_value(def)?;
        self.visit.field(self.field);
        Ok(())
    }

    /// Checks the current field's value against its type and allowed values.
    #[inline(always)]
    fn check_value(&mut self, def: Option<&'static FieldDef>) -> Result<(), Fault> {
        let announced = self.declared_data.take();
        let Field { tag, value } = self.field;
        let Some(def) = def else {
            return Ok(());
        };
        let formed = match def.kind {
            Kind::String
            | Kind::MultipleValueString
            | Kind::MultipleStringValue
            | Kind::Currency
            | Kind::Exchange
            | Kind::Country
            | Kind::Language => true,
            Kind::Char => value.len() == 1,
            Kind::Data | Kind::XmlData => {
                if announced != Some((tag, value.len())) {
                    return fault(Problem::BadDataLength, tag);
                }
                return Ok(());
            }
            // A length field announcing a data field (FIX 4.2 types these as INT).
            Kind::Length | Kind::Int if def.pair != 0 => match parse_uint(value) {
                Some(len) => {
                    let len = usize::try_from(len).unwrap_or(usize::MAX);
                    self.declared_data = Some((def.pair, len));
                    true
                }
                None => false,
            },
            kind => well_formed(kind, value),
        };
        if !formed {
            return fault(Problem::BadFormat, tag);
        }
        let allowed = match def.kind {
            _ if def.values.is_empty() => true,
            Kind::MultipleValueString | Kind::MultipleStringValue | Kind::MultipleCharValue => {
                value
                    .split(|&b| b == b' ')
                    .filter(|t| !t.is_empty())
                    .all(|t| def.allows(t))
            }
            _ => def.allows(value),
        };
        if allowed {
            Ok(())
        } else {
            fault(Problem::OutOfRange, tag)
        }
    }

    /// Reads the next field into `field` ([`END`] when there is none). A data field
    /// announced by the length field just before it is read by that length, so it may
    /// contain SOH.
    #[inline(always)]
    fn advance(&mut self) -> Result<(), Fault> {
        let from = self.pos;
        let Some(rest) = self.bytes.get(from..).filter(|r| !r.is_empty()) else {
            self.field = END;
            return Ok(());
        };
        let mut tag: u32 = 0;
        let mut digits = 0;
        while let Some(digit) = rest
            .get(digits)
            .map(|b| b.wrapping_sub(b'0'))
            .filter(|&d| d <= 9)
        {
            // Nine digits at most, as in `parse::Fields`.
            if digits >= 9 {
                return fault(Problem::InvalidTag, 0);
            }
            tag = tag * 10 + u32::from(digit);
            digits += 1;
        }
        if digits == 0 || rest.get(digits) != Some(&b'=') || tag == 0 {
            return fault(Problem::InvalidTag, 0);
        }
        let rest = rest.get(digits + 1..).unwrap_or_default();
        let len = match self.declared_data {
            Some((data_tag, len)) if data_tag == tag && rest.get(len) == Some(&SOH) => len,
            _ => match find_soh(rest) {
                Some(len) => len,
                None => return fault(Problem::NoValue, tag),
            },
        };
        if len == 0 {
            return fault(Problem::NoValue, tag);
        }
        let Some(value) = rest.get(..len) else {
            return fault(Problem::NoValue, tag);
        };
        self.pos = from + digits + 1 + len + 1;
        self.field = Field { tag, value };
        Ok(())
    }
}

/// The index of the first SOH in `bytes`, eight bytes at a time.
#[inline(always)]
fn find_soh(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut rest = bytes;
    while let Some((chunk, after)) = rest.split_first_chunk::<8>() {
        // Bytes equal to SOH become zero; the lowest zero byte sets its high bit exactly
        // (borrows only disturb the bytes above it), and the first in memory is the lowest.
        let x = u64::from_le_bytes(*chunk) ^ (ONES * u64::from(SOH));
        let zeros = x.wrapping_sub(ONES) & !x & HIGHS;
        if zeros != 0 {
            return Some(bytes.len() - rest.len() + (zeros.trailing_zeros() / 8) as usize);
        }
        rest = after;
    }
    let tail = rest.iter().position(|&b| b == SOH)?;
    Some(bytes.len() - rest.len() + tail)
}

fn required(section: &Section, seen: &Seen) -> Result<(), Fault> {
    match section.first_missing(&seen.0) {
        Some(entry) => fault(Problem::Missing, entry.tag),
        None => Ok(()),
    }
}

/// Whether a value has the syntax of its FIX type.
pub(crate) fn well_formed(kind: Kind, v: &[u8]) -> bool {
    match kind {
        Kind::Int | Kind::DayOfMonth => parse_int(v).is_some(),
        Kind::Length | Kind::NumInGroup | Kind::SeqNum => parse_uint(v).is_some(),
        Kind::Float
        | Kind::Price
        | Kind::Qty
        | Kind::Amt
        | Kind::Percentage
        | Kind::PriceOffset => is_decimal(v),
        Kind::Char => v.len() == 1,
        Kind::Boolean => v == b"Y" || v == b"N",
        Kind::MultipleCharValue => v.split(|&b| b == b' ').all(|t| t.len() <= 1),
        // The syntax of `time::parse_utc_timestamp`, without its 2262 limit (years to 9999 are
        // valid FIX; "99991231-23:59:59" is a common "never").
        Kind::UtcTimestamp => v.len() > 9 && v[8] == b'-' && is_date(&v[..8]) && is_time(&v[9..]),
        Kind::UtcDateOnly | Kind::LocalMktDate => v.len() == 8 && is_date(v),
        Kind::UtcTimeOnly => is_time(v),
        Kind::MonthYear => is_month_year(v),
        Kind::TzTimeOnly => is_tz_time(v),
        Kind::TzTimestamp => v.len() > 9 && v[8] == b'-' && is_date(&v[..8]) && is_tz_time(&v[9..]),
        Kind::String
        | Kind::MultipleValueString
        | Kind::MultipleStringValue
        | Kind::Currency
        | Kind::Exchange
        | Kind::Country
        | Kind::Language
        | Kind::Data
        | Kind::XmlData => true,
    }
}

/// `-?digits(.digits)?` with at least one digit (as [`crate::Decimal::parse`], any length).
fn is_decimal(v: &[u8]) -> bool {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    let mut points = 0;
    let mut any_digit = false;
    for &b in digits {
        match b {
            b'0'..=b'9' => any_digit = true,
            b'.' => points += 1,
            _ => return false,
        }
    }
    any_digit && points <= 1
}

fn number(v: &[u8]) -> Option<u32> {
    if v.is_empty() || v.len() > 4 {
        return None;
    }
    v.iter().try_fold(0u32, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
    })
}

/// YYYYMMDD.
fn is_date(v: &[u8]) -> bool {
    let Ok(&date) = <&[u8; 8]>::try_from(v) else {
        return false;
    };
    // All eight bytes in 0x30..=0x39: each high nibble is 3 before and after adding 6 (a carry
    // out of a byte only comes from one that fails by itself).
    const HIGH_NIBBLES: u64 = u64::from_ne_bytes([0xF0; 8]);
    let x = u64::from_le_bytes(date);
    let nibbles =
        (x & HIGH_NIBBLES) | ((x.wrapping_add(u64::from_ne_bytes([6; 8])) & HIGH_NIBBLES) >> 4);
    if nibbles != u64::from_ne_bytes([0x33; 8]) {
        return false;
    }
    let two = |i: usize| u32::from(date[i] - b'0') * 10 + u32::from(date[i + 1] - b'0');
    (1..=12).contains(&two(4)) && (1..=31).contains(&two(6))
}

/// Two ASCII digits as a number.
fn two_digits(tens: u8, ones: u8) -> Option<u32> {
    let (tens, ones) = (tens.wrapping_sub(b'0'), ones.wrapping_sub(b'0'));
    (tens <= 9 && ones <= 9).then(|| u32::from(tens) * 10 + u32::from(ones))
}

/// HH:MM:SS with 0, 3, 6 or 9 fraction digits.
fn is_time(v: &[u8]) -> bool {
    let &[h0, h1, b':', m0, m1, b':', s0, s1, ref fraction @ ..] = v else {
        return false;
    };
    let in_range = |tens, ones, max| two_digits(tens, ones).is_some_and(|n| n <= max);
    in_range(h0, h1, 23)
        && in_range(m0, m1, 59)
        && in_range(s0, s1, 60)
        && match fraction {
            [] => true,
            [b'.', digits @ ..] => {
                matches!(digits.len(), 3 | 6 | 9) && digits.iter().all(u8::is_ascii_digit)
            }
            _ => false,
        }
}

fn is_hh_mm(v: &[u8]) -> bool {
    v.len() == 5
        && number(&v[..2]).is_some_and(|h| h <= 23)
        && v[2] == b':'
        && number(&v[3..5]).is_some_and(|m| m <= 59)
}

/// HH:MM[:SS[.s...]] followed by Z, ±hh or ±hh:mm, or nothing.
fn is_tz_time(v: &[u8]) -> bool {
    let zone_at = v
        .iter()
        .position(|&b| b == b'Z' || b == b'+' || b == b'-')
        .unwrap_or(v.len());
    let (time, zone) = v.split_at(zone_at);
    let time_ok = time.len() == 5 && is_hh_mm(time) || is_time(time);
    let zone_ok = match zone {
        [] | [b'Z'] => true,
        [b'+' | b'-', rest @ ..] => match rest.len() {
            2 => number(rest).is_some_and(|h| h <= 14),
            5 => is_hh_mm(rest),
            _ => false,
        },
        _ => false,
    };
    time_ok && zone_ok
}

/// YYYYMM, YYYYMMDD or YYYYMMwN.
fn is_month_year(v: &[u8]) -> bool {
    if v.len() < 6
        || number(&v[..4]).is_none()
        || !number(&v[4..6]).is_some_and(|m| (1..=12).contains(&m))
    {
        return false;
    }
    match &v[6..] {
        [] => true,
        [b'w', n] => (b'1'..=b'5').contains(n),
        day => day.len() == 2 && number(day).is_some_and(|d| (1..=31).contains(&d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert!(well_formed(Kind::Int, b"-12"));
        assert!(!well_formed(Kind::Int, b"1.5"));
        assert!(!well_formed(Kind::SeqNum, b"-1"));
        assert!(well_formed(Kind::Price, b"100.25"));
        assert!(well_formed(Kind::Qty, b"123456789012345678901234567890"));
        assert!(!well_formed(Kind::Price, b"1e5"));
        assert!(!well_formed(Kind::Price, b"1.2.3"));
        assert!(!well_formed(Kind::Price, b"-"));
        assert!(well_formed(Kind::Char, b"1"));
        assert!(!well_formed(Kind::Char, b"12"));
        assert!(!well_formed(Kind::Boolean, b"y"));
        assert!(well_formed(Kind::UtcTimestamp, b"20261122-10:00:00.123456"));
        assert!(well_formed(Kind::UtcTimestamp, b"99991231-23:59:59"));
        assert!(!well_formed(Kind::UtcTimestamp, b"20261122-10:00:00.12"));
        assert!(!well_formed(Kind::UtcTimestamp, b"20261122 10:00:00"));
        assert!(!well_formed(Kind::UtcTimestamp, b"20261122-25:00:00"));
        assert!(well_formed(Kind::UtcDateOnly, b"20261122"));
        assert!(!well_formed(Kind::UtcDateOnly, b"20261322"));
        assert!(well_formed(Kind::UtcTimeOnly, b"23:59:60.123"));
        assert!(!well_formed(Kind::UtcTimeOnly, b"24:00:00"));
        assert!(well_formed(Kind::MonthYear, b"202612"));
        assert!(well_formed(Kind::MonthYear, b"20261231"));
        assert!(well_formed(Kind::MonthYear, b"202612w2"));
        assert!(!well_formed(Kind::MonthYear, b"202612w9"));
        assert!(well_formed(Kind::TzTimeOnly, b"07:39Z"));
        assert!(well_formed(Kind::TzTimeOnly, b"02:39-05"));
        assert!(well_formed(Kind::TzTimeOnly, b"15:39:07+08:00"));
        assert!(!well_formed(Kind::TzTimeOnly, b"15:39:07+8"));
        assert!(well_formed(Kind::TzTimestamp, b"20060901-07:39Z"));
        assert!(well_formed(Kind::MultipleCharValue, b"A B"));
        assert!(!well_formed(Kind::MultipleCharValue, b"AB"));
    }
}
