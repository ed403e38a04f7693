//! Checking a message against its dictionary, in one pass over its fields.
//!
//! The first problem found is returned as a [`Violation`] carrying the SessionRejectReason
//! (tag 373) and the tag at fault (371), ready for a session-level Reject. Problems are found
//! in field order; missing required fields are reported after the walk (header, body, trailer).
//!
//! Behaviour follows QuickFIX/J's defaults where it makes sense:
//! - user-defined tags (5000 and above) that the dictionary does not know are accepted
//!   anywhere in the body;
//! - a repeating group's entries must start with the delimiter field and keep the
//!   dictionary's member order (reason 15), and the entry count must match NumInGroup (16);
//! - header fields after the body and anything after the trailer fields are reason 14.
//!
//! Data fields: a data field (e.g. RawData 96, EncodedText 355) may contain SOH. The validator
//! reads it by the length its length field (95, 354, ...) declares, so SOH inside data is
//! supported here. [`crate::Frame::fields`] and [`crate::Frame::get`] split at every SOH and
//! do not support it.

use crate::SOH;
use crate::Version;
use crate::parse::{Field, Frame, parse_int, parse_uint};

use super::{Dictionary, Entry, Group, Kind, MAX_SECTION, Message, Section, dictionaries};

/// SessionRejectReason (373) values.
pub mod reason {
    pub const INVALID_TAG_NUMBER: u32 = 0;
    pub const REQUIRED_TAG_MISSING: u32 = 1;
    pub const TAG_NOT_DEFINED_FOR_MSG_TYPE: u32 = 2;
    pub const UNDEFINED_TAG: u32 = 3;
    pub const TAG_WITHOUT_VALUE: u32 = 4;
    pub const VALUE_OUT_OF_RANGE: u32 = 5;
    pub const INCORRECT_DATA_FORMAT: u32 = 6;
    pub const INVALID_MSG_TYPE: u32 = 11;
    pub const TAG_APPEARS_MORE_THAN_ONCE: u32 = 13;
    pub const TAG_OUT_OF_ORDER: u32 = 14;
    pub const GROUP_FIELDS_OUT_OF_ORDER: u32 = 15;
    pub const INCORRECT_NUM_IN_GROUP: u32 = 16;
}

/// Tags at and above this are user-defined; unknown ones are accepted.
pub const USER_DEFINED_TAG_MIN: u32 = 5000;

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
/// The caller chooses `version` from BeginString; it is not compared here.
pub fn validate(version: Version, frame: &Frame<'_>) -> Result<(), Violation> {
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
            "MsgType not defined in this FIX version",
        ));
    };
    let mut walk = Walk {
        session,
        app,
        body_dict,
        bytes: frame.body_after_msg_type(),
        pos: 0,
        pending: None,
        declared_data: None,
    };
    walk.message(message)
}

/// Which entries of a section have been seen, by position. Sections have at most
/// [`MAX_SECTION`] entries (checked when the tables are built); a position beyond that is never
/// marked, so it cannot panic.
struct Seen([u64; MAX_SECTION / 64]);

impl Seen {
    fn new() -> Seen {
        Seen([0; MAX_SECTION / 64])
    }

    fn set(&mut self, i: usize) {
        if let Some(word) = self.0.get_mut(i / 64) {
            *word |= 1 << (i % 64);
        }
    }

    fn has(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn set_tag(&mut self, section: &Section, tag: u32) {
        if let Some(i) = section.position(tag) {
            self.set(i);
        }
    }
}

struct Walk<'a> {
    session: &'static Dictionary,
    app: &'static Dictionary,
    /// The one of the two that defines the message.
    body_dict: &'static Dictionary,
    /// The fields after MsgType, up to the CheckSum.
    bytes: &'a [u8],
    pos: usize,
    /// A field read but handed back by an inner section to the one around it.
    pending: Option<Field<'a>>,
    /// The data field and its length announced by the last length field.
    declared_data: Option<(u32, usize)>,
}

impl<'a> Walk<'a> {
    fn message(&mut self, message: Option<&'static Message>) -> Result<(), Violation> {
        let session = self.session;
        let mut header_seen = Seen::new();
        for tag in [8, 9, 35] {
            header_seen.set_tag(&session.header, tag);
        }
        self.section(session, &session.header, &mut header_seen, None)?;

        let mut body_seen = Seen::new();
        loop {
            if let Some(m) = message {
                self.section(self.body_dict, &m.body, &mut body_seen, None)?;
            }
            let Some(field) = self.next()? else { break };
            if session.trailer.position(field.tag).is_some() {
                self.pending = Some(field);
                break;
            }
            if let Some(i) = session.header.position(field.tag) {
                return Err(if header_seen.has(i) {
                    violation(
                        reason::TAG_APPEARS_MORE_THAN_ONCE,
                        Some(field.tag),
                        "header tag appears more than once",
                    )
                } else {
                    violation(
                        reason::TAG_OUT_OF_ORDER,
                        Some(field.tag),
                        "header field after the body",
                    )
                });
            }
            self.stray(message.is_none(), field)?;
        }

        let mut trailer_seen = Seen::new();
        trailer_seen.set_tag(&session.trailer, crate::tags::CHECK_SUM);
        self.section(session, &session.trailer, &mut trailer_seen, None)?;
        if let Some(field) = self.next()? {
            return Err(violation(
                reason::TAG_OUT_OF_ORDER,
                Some(field.tag),
                "field after the trailer",
            ));
        }

        required(&session.header, &header_seen)?;
        if let Some(m) = message {
            required(&m.body, &body_seen)?;
        }
        required(&session.trailer, &trailer_seen)
    }

    /// A body field that is not in the message: fine if user-defined, or if the message type
    /// is out of scope (then only the tag number is checked).
    fn stray(&mut self, out_of_scope: bool, field: Field<'a>) -> Result<(), Violation> {
        let defined = self.session.defines_tag(field.tag) || self.app.defines_tag(field.tag);
        if !defined {
            if field.tag >= USER_DEFINED_TAG_MIN {
                return Ok(());
            }
            return Err(violation(
                reason::INVALID_TAG_NUMBER,
                Some(field.tag),
                "tag not defined in this FIX version",
            ));
        }
        if out_of_scope {
            // Length fields still announce their data, so SOH inside data is read right.
            return self.value(self.body_dict, field);
        }
        Err(violation(
            reason::TAG_NOT_DEFINED_FOR_MSG_TYPE,
            Some(field.tag),
            "tag not defined for this message type",
        ))
    }

    /// Reads the fields of one section (header, body, trailer or one group entry) until one
    /// that does not belong, which is left in `pending`. In a group entry (`group` is set)
    /// members must keep the dictionary order, and the delimiter ends the entry.
    fn section(
        &mut self,
        dict: &'static Dictionary,
        section: &Section,
        seen: &mut Seen,
        group: Option<&Group>,
    ) -> Result<(), Violation> {
        let mut last: Option<usize> = group.map(|_| 0);
        while let Some(field) = self.next()? {
            let Some(i) = section.position(field.tag) else {
                self.pending = Some(field);
                return Ok(());
            };
            if let Some(last_i) = last {
                if field.tag == group.map_or(0, |g| g.delimiter) {
                    self.pending = Some(field);
                    return Ok(());
                }
                if i <= last_i {
                    return Err(violation(
                        reason::GROUP_FIELDS_OUT_OF_ORDER,
                        Some(field.tag),
                        "repeating group member out of order",
                    ));
                }
                last = Some(i);
            } else if seen.has(i) {
                return Err(violation(
                    reason::TAG_APPEARS_MORE_THAN_ONCE,
                    Some(field.tag),
                    "tag appears more than once",
                ));
            }
            seen.set(i);
            self.value(dict, field)?;
            if let Some(&Entry { group: Some(g), .. }) = section.entries.get(i) {
                self.group(dict, g, field)?;
            }
        }
        Ok(())
    }

    /// Reads the entries of a repeating group whose NumInGroup field was just read.
    fn group(
        &mut self,
        dict: &'static Dictionary,
        index: u16,
        count: Field<'a>,
    ) -> Result<(), Violation> {
        let Some(group) = dict.group(index) else {
            return Ok(());
        };
        // The value was format-checked as NumInGroup already.
        let declared = parse_uint(count.value).unwrap_or(0);
        let mut entries: u64 = 0;
        while let Some(field) = self.next()? {
            if field.tag == group.delimiter {
                entries += 1;
                if entries > declared {
                    return Err(wrong_count(group.count_tag));
                }
                let mut seen = Seen::new();
                // The delimiter is always the first member.
                seen.set(0);
                self.value(dict, field)?;
                if let Some(&Entry { group: Some(g), .. }) = group.members.entries.first() {
                    self.group(dict, g, field)?;
                }
                self.section(dict, &group.members, &mut seen, Some(group))?;
                required(&group.members, &seen)?;
            } else if entries == 0 && group.members.position(field.tag).is_some() {
                return Err(violation(
                    reason::GROUP_FIELDS_OUT_OF_ORDER,
                    Some(field.tag),
                    "repeating group entry does not start with its delimiter",
                ));
            } else {
                self.pending = Some(field);
                break;
            }
        }
        if entries != declared {
            return Err(wrong_count(group.count_tag));
        }
        Ok(())
    }

    /// Checks one value against its field's type and allowed values.
    fn value(&mut self, dict: &'static Dictionary, field: Field<'a>) -> Result<(), Violation> {
        let announced = self.declared_data.take();
        let Some(def) = dict
            .field(field.tag)
            .or_else(|| self.session.field(field.tag))
        else {
            return Ok(());
        };
        let bad_format = |text| {
            Err(violation(
                reason::INCORRECT_DATA_FORMAT,
                Some(field.tag),
                text,
            ))
        };
        match def.kind {
            Kind::Data | Kind::XmlData => {
                if announced != Some((field.tag, field.value.len())) {
                    return bad_format(
                        "data field does not follow its length field, or has another length",
                    );
                }
                return Ok(());
            }
            // A length field announcing a data field (FIX 4.2 types these as INT).
            Kind::Length | Kind::Int if def.pair != 0 => {
                let Some(len) = parse_uint(field.value) else {
                    return bad_format("incorrect data format for value");
                };
                self.declared_data = Some((def.pair, usize::try_from(len).unwrap_or(usize::MAX)));
            }
            kind => {
                if !well_formed(kind, field.value) {
                    return bad_format("incorrect data format for value");
                }
            }
        }
        if def.values.is_empty() {
            return Ok(());
        }
        let ok = match def.kind {
            Kind::MultipleValueString | Kind::MultipleStringValue | Kind::MultipleCharValue => {
                field
                    .value
                    .split(|&b| b == b' ')
                    .filter(|t| !t.is_empty())
                    .all(|t| def.allows(t))
            }
            _ => def.allows(field.value),
        };
        if ok {
            Ok(())
        } else {
            Err(violation(
                reason::VALUE_OUT_OF_RANGE,
                Some(field.tag),
                "value is incorrect (out of range) for this tag",
            ))
        }
    }

    /// The next field, the pending one first. A data field announced by the length field just
    /// before it is read by that length, so it may contain SOH.
    fn next(&mut self) -> Result<Option<Field<'a>>, Violation> {
        if let Some(field) = self.pending.take() {
            return Ok(Some(field));
        }
        let bytes = self.bytes;
        if self.pos >= bytes.len() {
            return Ok(None);
        }
        let invalid_tag = violation(reason::INVALID_TAG_NUMBER, None, "invalid tag number");
        let mut tag: u32 = 0;
        let mut i = self.pos;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            // Nine digits at most, as in `parse::Fields`.
            if i - self.pos >= 9 {
                return Err(invalid_tag);
            }
            tag = tag * 10 + u32::from(bytes[i] - b'0');
            i += 1;
        }
        if i == self.pos || i >= bytes.len() || bytes[i] != b'=' || tag == 0 {
            return Err(invalid_tag);
        }
        let start = i + 1;
        let end = match self.declared_data {
            Some((data_tag, len))
                if data_tag == tag
                    && start
                        .checked_add(len)
                        .is_some_and(|e| bytes.get(e) == Some(&SOH)) =>
            {
                start + len
            }
            _ => match bytes[start..].iter().position(|&b| b == SOH) {
                Some(len) => start + len,
                None => {
                    return Err(violation(
                        reason::TAG_WITHOUT_VALUE,
                        Some(tag),
                        "tag specified without a value",
                    ));
                }
            },
        };
        self.pos = end + 1;
        if end == start {
            return Err(violation(
                reason::TAG_WITHOUT_VALUE,
                Some(tag),
                "tag specified without a value",
            ));
        }
        Ok(Some(Field {
            tag,
            value: &bytes[start..end],
        }))
    }
}

fn wrong_count(count_tag: u32) -> Violation {
    violation(
        reason::INCORRECT_NUM_IN_GROUP,
        Some(count_tag),
        "incorrect NumInGroup count for repeating group",
    )
}

fn required(section: &Section, seen: &Seen) -> Result<(), Violation> {
    match section.first_missing(&seen.0) {
        Some(entry) => Err(violation(
            reason::REQUIRED_TAG_MISSING,
            Some(entry.tag),
            "required tag missing",
        )),
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
    v.len() == 8
        && number(&v[..4]).is_some()
        && number(&v[4..6]).is_some_and(|m| (1..=12).contains(&m))
        && number(&v[6..8]).is_some_and(|d| (1..=31).contains(&d))
}

/// HH:MM:SS with 0, 3, 6 or 9 fraction digits.
fn is_time(v: &[u8]) -> bool {
    if v.len() < 8 || !is_hh_mm(&v[..5]) || v[5] != b':' {
        return false;
    }
    if number(&v[6..8]).is_none_or(|s| s > 60) {
        return false;
    }
    match v.len() {
        8 => true,
        12 | 15 | 18 => v[8] == b'.' && v[9..].iter().all(u8::is_ascii_digit),
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
