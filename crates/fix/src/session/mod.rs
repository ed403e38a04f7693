//! The FIX session layer for an acceptor, as a pure state machine: bytes and time in, bytes and
//! an [`Outcome`] out. No sockets, no clock reads, no threads.
//!
//! # How a server drives a [`Session`]
//!
//! ```text
//! accept()                  -> session.on_connect(now)
//! bytes arrive              -> loop over next_frame(buf, max):
//!                                Ok(Some((frame, n)))  -> session.on_message(&frame, now, &mut auth, &mut out)
//!                                  then while let Ok(Some(m)) = session.next_queued(now, &mut out):
//!                                    session.on_queued_message(&frame_of(m), now, &mut auth, &mut out)
//!                                Err(garbled)          -> session.on_garbled(&buf[..garbled.skip], now)
//! every ~100 ms (or at session.next_deadline_ns())     -> session.on_timer(now, &mut out)
//! the application answers   -> session.send_app(b"8", now, |w| { ... }, &mut out)
//! after every call          -> write `out` to the socket, then act on the Outcome
//!                              (Outcome::Disconnect: write `out`, then close)
//! connection closed         -> session.on_disconnect(now)
//! shutdown                  -> session.logout("shutting down", now, &mut out), then keep reading
//!                              until Outcome::Disconnect (their Logout, or the timeout)
//! ```
//!
//! [`Outcome::Deliver`] hands an in-sequence application message to the caller; its MsgSeqNum
//! is already consumed. The caller validates it (data dictionary, with
//! [`SessionConfig::validation`]) and may answer with [`Session::reject`] (session Reject 35=3:
//! an invalid tag, a missing field, an unknown MsgType with reason 11) or
//! [`Session::business_reject`] (35=j: a valid but unsupported MsgType with reason 3, an
//! unknown security, ...), or reply with [`Session::send_reply`]. The session itself delivers
//! every MsgType that is not a session-level one (0 1 2 3 4 5 A), so that choice stays with the
//! application.
//!
//! Messages with third-party routing are accepted (case 18a). Rejects, BusinessMessageRejects
//! and [`Session::send_reply`] carry the routing of the message they answer back:
//! OnBehalfOfCompID/SubID/LocationID (115/116/144) as DeliverToCompID/SubID/LocationID
//! (128/129/145) and the other way round. A Reject's Text is
//! the reason's standard wording ([`reject_reason::text`]) with `, field=<RefTagID>` when
//! there is a RefTagID, as QuickFIX/J words it: "Required tag missing, field=55".
//!
//! # What the session checks, in order (the FIX session test cases in parentheses)
//!
//! Before a Logon is accepted, anything but a Logon closes the connection without a reply
//! (case 2S). For every message: a BeginString other than the configured one → Logout and
//! disconnect (case 2i); a missing or invalid MsgSeqNum → Logout "MsgSeqNum (34) missing or
//! invalid" and disconnect, except on a SequenceReset-Reset, which is processed whatever its
//! MsgSeqNum (case 11). Then:
//!
//! - Logon (case 1S): CompIDs, SendingTime, HeartBtInt (present, 0..=max), EncryptMethod (0 or
//!   absent), DefaultApplVerID (FIXT.1.1 only: required, 7, 8 or 9 = FIX 5.0, 5.0 SP1 or
//!   5.0 SP2; any other value is named in the Logout's Text), no malformed
//!   field, the `auth` callback, then the sequence number: too low without ResetSeqNumFlag →
//!   Logout "MsgSeqNum too low, expecting X but received Y" (case 2c). Wrong CompIDs or a
//!   refusal by `auth` (an identity not configured or not authenticated): disconnect without a
//!   message (case 1S.c). An EncryptMethod other than 0 → Reject (reason 7, ref tag 98; sent
//!   although not logged on), the Logon's number used, then Logout and disconnect (case 17b).
//!   Any other failure: Logout with a Text and disconnect (case 1S.d).
//!   Accepted: we reply Logon (98=0, the same 108,
//!   141=Y when asked to reset, 1137 as received for FIXT); if its MsgSeqNum was too high, a
//!   ResendRequest follows (case 1S.a). ResetSeqNumFlag=Y resets both directions to 1 first, also
//!   during a session. A Logon without it while logged on → Logout and disconnect.
//! - Other messages: SendingTime missing or more than `max_clock_skew_ns` from `now` → Reject
//!   (reason 10, ref tag 52) and Logout, disconnect (case 2o; a SendingTime that is not a valid
//!   UTCTimestamp too);
//!   SenderCompID or TargetCompID missing → Reject reason 1, empty → reason 4, and the session
//!   goes on (the number is used up if it was the expected one); wrong → Reject (reason 9) and
//!   Logout, disconnect (case 2k).
//! - Sequence: too high → the message is queued (a ResendRequest is served instead, case 20)
//!   and processed once the gap below it is filled: after each message the caller takes
//!   [`Session::next_queued`] until `None` (case 2b). A ResendRequest goes out once while one
//!   is pending, for the gap only (BeginSeqNo = expected, EndSeqNo = the queued message's
//!   number - 1, QuickFIX/J's `ClosedResendInterval`), so that what is queued is not sent
//!   again; for a message not queued, to the end (EndSeqNo = 0). The queue holds at most
//!   `max_queued_bytes` (1 MiB); a message beyond it is dropped, and once the range asked for
//!   has come, the rest of the gap is asked for again, to the end. Too low without PossDupFlag=Y →
//!   Logout "MsgSeqNum too low, expecting X but received Y", disconnect (case 2c); with it → ignored
//!   (case 2e). PossDupFlag=Y (except on SequenceReset) needs OrigSendingTime: missing → Reject
//!   (reason 1, ref tag 122) (case 2g); later than SendingTime → Reject (reason 10) and Logout,
//!   disconnect (case 2f).
//! - In sequence, a malformed field is rejected and the number consumed: invalid tag (reason 0),
//!   tag without a value (4), a header tag twice (13), PossDupFlag not Y/N (6), a value that
//!   holds an SOH (17, RefTagID the field: a chunk without `=` right after a field, as in
//!   `58=ab<SOH>cd<SOH>`) (case 14).
//!   Heartbeat, TestRequest, ResendRequest and SequenceReset-GapFill are then checked against
//!   the version's dictionary ([`crate::dict::validate_with`]): any fault is a Reject with its
//!   reason (0, 1, 2, 4, 5, 6, 13, 14, 15, 16) and RefTagID, the number consumed (case 14).
//!   User-defined tags (5000 and up) pass only with `allow_user_defined_tags`. Not checked
//!   there: a Logon (its fields are checked one by one above; FIX 4.2 does not define the
//!   Username and Password the venue asks for), a Logout (answered whatever it holds), a
//!   Reject (never answered with a Reject) and a SequenceReset-Reset.
//! - Heartbeat (case 5), Reject (case 7): consumed. TestRequest: Heartbeat with its TestReqID (case 4b).
//!   ResendRequest (case 8): served (also when its own number is too high, before asking for ours,
//!   case 20). SequenceReset-GapFill (case 10): the sequence checks apply, NewSeqNo becomes the next
//!   expected, NewSeqNo not above MsgSeqNum → Reject (reason 5, ref tag 36). SequenceReset-Reset
//!   (case 11): MsgSeqNum ignored, even missing; NewSeqNo above the expected number moves it,
//!   equal changes nothing, below → Reject (reason 5, ref tag 36); the session goes on.
//!   Logout (case 13b): answered with a Logout (unless it answers ours, case 13a: then
//!   [`Outcome::Disconnect`]); then the session waits for the counterparty to disconnect, up to
//!   `logout_timeout_ns` (10 s), after which [`Session::on_timer`] answers
//!   [`Outcome::Disconnect`]. Whatever arrives meanwhile is ignored (logged, not processed, no
//!   number consumed); application messages sent meanwhile are stored, not written, as when
//!   not logged on.
//! - Garbled input (cases 2d, 2m, 2t, 3b, 3c, 3e) is ignored: [`Session::on_garbled`] only
//!   counts and logs it.
//!
//! Errors after logon disconnect right after the Logout instead of waiting for the
//! counterparty's Logout: the caller writes `out` before closing, so it is still delivered.
//! After an unsolicited Logout (case 13b) it is the other way round: our answer goes out and
//! the caller keeps the connection open until the counterparty closes it or `on_timer` says
//! [`Outcome::Disconnect`].
//!
//! # Versions
//! FIX 4.0 to 4.4 and FIXT.1.1, one per session ([`SessionConfig::version`]). What differs:
//! FIX 4.0 and 4.1 write UTCTimestamps to the second (they define no fraction); FIX 4.0 has no
//! ResetSeqNumFlag (141), which is then neither honoured nor sent; a FIX 4.0 or 4.1 Reject has
//! RefSeqNum and a Text only (no 371, 372, 373: the Text names the reason and the tag), and
//! having no BusinessMessageReject either, [`Session::business_reject`] sends a Reject there.
//! On FIXT.1.1 the Logon's DefaultApplVerID becomes [`Session::default_appl_version`].
//!
//! # Resends (case 8)
//! Application messages and Rejects are stored when sent ([`MessageStore`]) and resent with
//! PossDupFlag=Y, OrigSendingTime = the original SendingTime, a new SendingTime and the same
//! MsgSeqNum. Everything else (the other session-level messages) is not stored and its
//! numbers are covered by SequenceReset-GapFill (123=Y, 36=NewSeqNo, 43=Y), consecutive ones
//! in one. EndSeqNo 0, or anything at or beyond our last number (999999), means "to the end".
//! A resend is written in chunks of `resend_chunk_bytes`: the first with the ResendRequest, the
//! rest by [`Session::pump_resend`] as the counterparty reads ([`Session::is_resending`]); a
//! ResendRequest that arrives while one is served replaces it. Messages sent meanwhile go out
//! at once, with their new numbers, beside the resent ones.
//!
//! Application messages sent while not logged on are stored and not written; the
//! counterparty sees the gap at the next Logon and a ResendRequest brings them (case 16).
//!
//! A TestRequest's TestReqID is the session's own: `TEST-<its MsgSeqNum>-<its SendingTime>`.
//!
//! # Not done here
//! - NextExpectedMsgSeqNum (789) on Logon, encryption (case 17: another EncryptMethod is
//!   refused, case 17b), session schedules (start/end times, daily
//!   reset). Third-party routing is only reversed on replies: OnBehalfOfCompID and
//!   DeliverToCompID are not checked against a list (case 18b).
//! - PossResend (97) duplicates (case 19) are for the application (by ClOrdID): the session
//!   delivers them like any in-sequence message.
//! - Data fields with an embedded SOH (RawData 96 and the like) in the header scan.
//! - A store or log write failure is returned as [`SessionError`]; the caller closes.

pub mod log;
pub mod store;

use std::collections::BTreeMap;
use std::io;

pub use log::{Direction, LogFilter, LogRecord, MessageLog};
pub use store::{FileStore, MemoryStore, MessageStore};

use crate::parse::{Fields, parse_uint};
use crate::{ApplVersion, Frame, MessageWriter, SOH, Version, tags, time};

/// SessionRejectReason (373) values.
pub mod reject_reason {
    pub const INVALID_TAG_NUMBER: u32 = 0;
    pub const REQUIRED_TAG_MISSING: u32 = 1;
    pub const TAG_NOT_DEFINED_FOR_MSG_TYPE: u32 = 2;
    pub const UNDEFINED_TAG: u32 = 3;
    pub const TAG_WITHOUT_VALUE: u32 = 4;
    pub const VALUE_INCORRECT: u32 = 5;
    pub const INCORRECT_DATA_FORMAT: u32 = 6;
    pub const DECRYPTION_PROBLEM: u32 = 7;
    pub const COMP_ID_PROBLEM: u32 = 9;
    pub const SENDING_TIME_ACCURACY: u32 = 10;
    pub const INVALID_MSG_TYPE: u32 = 11;
    pub const TAG_APPEARS_MORE_THAN_ONCE: u32 = 13;
    pub const TAG_OUT_OF_ORDER: u32 = 14;
    pub const REPEATING_GROUP_FIELDS_OUT_OF_ORDER: u32 = 15;
    pub const INCORRECT_NUM_IN_GROUP: u32 = 16;
    pub const NON_DATA_VALUE_INCLUDES_FIELD_DELIMITER: u32 = 17;
    pub const OTHER: u32 = 99;

    /// The standard wording of a reason (QuickFIX/J's), which a Reject's Text starts with;
    /// the session adds ", field=N" when RefTagID is set.
    pub fn text(reason: u32) -> &'static str {
        match reason {
            INVALID_TAG_NUMBER => "Invalid tag number",
            REQUIRED_TAG_MISSING => "Required tag missing",
            TAG_NOT_DEFINED_FOR_MSG_TYPE => "Tag not defined for this message type",
            UNDEFINED_TAG => "Undefined Tag",
            TAG_WITHOUT_VALUE => "Tag specified without a value",
            VALUE_INCORRECT => "Value is incorrect (out of range) for this tag",
            INCORRECT_DATA_FORMAT => "Incorrect data format for value",
            DECRYPTION_PROBLEM => "Decryption problem",
            COMP_ID_PROBLEM => "CompID problem",
            SENDING_TIME_ACCURACY => "SendingTime accuracy problem",
            INVALID_MSG_TYPE => "Invalid MsgType",
            TAG_APPEARS_MORE_THAN_ONCE => "Tag appears more than once",
            TAG_OUT_OF_ORDER => "Tag specified out of required order",
            REPEATING_GROUP_FIELDS_OUT_OF_ORDER => "Repeating group fields out of order",
            INCORRECT_NUM_IN_GROUP => "Incorrect NumInGroup count for repeating group",
            NON_DATA_VALUE_INCLUDES_FIELD_DELIMITER => {
                "Non Data Value includes Field Delimiter (SOH character)"
            }
            _ => "Other",
        }
    }
}

/// BusinessRejectReason (380) values.
pub mod business_reject_reason {
    pub const OTHER: u32 = 0;
    pub const UNKNOWN_ID: u32 = 1;
    pub const UNKNOWN_SECURITY: u32 = 2;
    pub const UNSUPPORTED_MESSAGE_TYPE: u32 = 3;
    pub const APPLICATION_NOT_AVAILABLE: u32 = 4;
    pub const CONDITIONALLY_REQUIRED_FIELD_MISSING: u32 = 5;
    pub const NOT_AUTHORIZED: u32 = 6;
}

/// How one session behaves. [`SessionConfig::new`] fills in the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// The BeginString expected and sent. FIX 5.0 SP2 is `Version::Fixt11`.
    pub version: Version,
    /// Our CompID: the SenderCompID we send, the TargetCompID we expect (e.g. "RIALTO").
    pub our_comp_id: String,
    /// Their CompID: the SenderCompID we expect, the TargetCompID we send (e.g. "TRADER1").
    pub their_comp_id: String,
    /// The largest difference allowed between a message's SendingTime and `now` (default 120 s).
    pub max_clock_skew_ns: i64,
    /// Both sequence numbers go back to 1 on every disconnect (a test acceptor; default off).
    pub reset_on_disconnect: bool,
    /// How long a connection may stay without a Logon before it is closed (default 10 s).
    pub logon_timeout_ns: i64,
    /// How long we wait for the reply to our Logout before closing, and for the counterparty to
    /// disconnect after we answered its Logout (default 10 s).
    pub logout_timeout_ns: i64,
    /// The largest HeartBtInt (108) a Logon may ask for, in seconds (default 3600). 0 means no
    /// heartbeats and is accepted.
    pub max_heart_bt_int_s: u32,
    /// Leave store and log writes buffered until [`Session::flush_stores`] (a server that
    /// handles many messages per turn of its loop writes them once, before its sockets).
    /// Off by default: every call ends with them handed to the OS.
    pub defer_flush: bool,
    /// How many bytes a resend writes per call (default 64 KiB). A ResendRequest writes the
    /// first chunk at once; the rest waits for [`Session::pump_resend`], which a server calls
    /// as the counterparty reads, so that a long resend never sits in memory whole.
    pub resend_chunk_bytes: usize,
    /// Accept user-defined tags (5000 and above) that the dictionary does not define
    /// (`fix.allow_user_defined_tags`, default off: they are rejected with reason 0).
    pub allow_user_defined_tags: bool,
    /// How many bytes of messages that arrive above a sequence gap are kept until the gap is
    /// filled (default 1 MiB). Beyond it they are dropped, and asked for again once the range
    /// first asked for has come.
    pub max_queued_bytes: usize,
}

impl SessionConfig {
    pub fn new(version: Version, our_comp_id: &str, their_comp_id: &str) -> SessionConfig {
        SessionConfig {
            version,
            our_comp_id: our_comp_id.to_string(),
            their_comp_id: their_comp_id.to_string(),
            max_clock_skew_ns: 120_000_000_000,
            reset_on_disconnect: false,
            logon_timeout_ns: 10_000_000_000,
            logout_timeout_ns: 10_000_000_000,
            max_heart_bt_int_s: 3600,
            defer_flush: false,
            resend_chunk_bytes: 64 << 10,
            allow_user_defined_tags: false,
            max_queued_bytes: 1 << 20,
        }
    }

    /// The dictionary validation options these settings give.
    pub fn validation(&self) -> crate::dict::Options {
        crate::dict::Options {
            allow_user_defined_tags: self.allow_user_defined_tags,
        }
    }

    /// A name for the session's files: `<BeginString>-<our CompID>-<their CompID>`, e.g.
    /// `FIX.4.4-RIALTO-TRADER1`.
    pub fn session_name(&self) -> String {
        format!(
            "{}-{}-{}",
            self.version.name(),
            self.our_comp_id,
            self.their_comp_id
        )
    }
}

/// What the caller does after a call (always after writing `out` to the socket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing more.
    Handled,
    /// A Logon was accepted just now: the session is logged on.
    LoggedOn,
    /// An in-sequence application message (any MsgType that is not session-level): the caller
    /// handles the frame. Its MsgSeqNum is consumed already.
    Deliver,
    /// Close the connection (after writing `out`), then call [`Session::on_disconnect`].
    /// [`Session::disconnect_reason`] says why.
    Disconnect,
}

/// The fields of a Logon that the `auth` callback sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Logon<'a> {
    pub sender_comp_id: &'a [u8],
    pub target_comp_id: &'a [u8],
    pub username: Option<&'a [u8]>,
    pub password: Option<&'a [u8]>,
    /// Seconds; 0 means no heartbeats.
    pub heart_bt_int: u32,
    pub reset_seq_num: bool,
    pub default_appl_ver_id: Option<&'a [u8]>,
}

/// A store or log write failed. The caller should close the connection: what was sent can no
/// longer be resent.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("message store: {0}")]
    Store(#[source] io::Error),
    #[error("message log: {0}")]
    Log(#[source] io::Error),
}

/// A session Reject (35=3) to send, as [`Session::reject`] takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reject<'a> {
    /// RefSeqNum (45): the MsgSeqNum of the rejected message.
    pub ref_seq_num: u64,
    /// RefTagID (371).
    pub ref_tag: Option<u32>,
    /// RefMsgType (372).
    pub ref_msg_type: Option<&'a [u8]>,
    /// SessionRejectReason (373), see [`reject_reason`].
    pub reason: u32,
    /// Text (58), left out when empty.
    pub text: &'a str,
}

/// A BusinessMessageReject (35=j) to send, as [`Session::business_reject`] takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusinessReject<'a> {
    /// RefSeqNum (45).
    pub ref_seq_num: u64,
    /// RefMsgType (372).
    pub ref_msg_type: &'a [u8],
    /// BusinessRejectRefID (379): the rejected message's business ID (e.g. its ClOrdID).
    pub ref_id: Option<&'a [u8]>,
    /// BusinessRejectReason (380), see [`business_reject_reason`].
    pub reason: u32,
    /// Text (58), left out when empty.
    pub text: &'a str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Disconnected,
    AwaitingLogon {
        since_ns: i64,
    },
    LoggedOn,
    LogoutSent {
        at_ns: i64,
    },
    /// Their Logout was answered with ours: waiting for them to disconnect (case 13b).
    LogoutReceived {
        at_ns: i64,
    },
}

/// One FIX session (one counterparty), acceptor side. See the [module docs](self).
pub struct Session<S: MessageStore> {
    config: SessionConfig,
    store: S,
    log: Option<MessageLog>,
    state: State,
    heart_bt_int_ns: i64,
    last_sent_ns: i64,
    last_received_ns: i64,
    /// When our TestRequest went out, while it is unanswered.
    test_request_sent_ns: Option<i64>,
    /// While a ResendRequest of ours is pending: the highest MsgSeqNum seen beyond the gap.
    resend_until: Option<u64>,
    /// The last number that request asked for (`u64::MAX`: to the end).
    resend_end: u64,
    garbled_count: u64,
    disconnect_reason: Option<String>,
    /// A resend of ours being served, chunk by chunk.
    resending: Option<ResendCursor>,
    /// A reused buffer (stored messages on resend, messages built while not logged on).
    scratch: Vec<u8>,
    /// A store failure while writing an admin message, reported at the end of the call.
    store_error: Option<io::Error>,
    /// See [`Session::default_appl_version`].
    default_appl_version: ApplVersion,
    /// Messages that arrived above a gap, by MsgSeqNum, until the gap is filled.
    queued: BTreeMap<u64, Vec<u8>>,
    queued_bytes: usize,
    /// The routing fields of a reply to the message being handled, encoded
    /// (`128=<its 115><SOH>`... ): reverse routing for Rejects and replies.
    reply_routing: Vec<u8>,
}

/// Where a resend stands: the next stored message to look at, the last number asked for, and
/// the first number not yet covered by a resent message or a gap fill.
#[derive(Clone, Copy, Debug)]
struct ResendCursor {
    next: u64,
    end: u64,
    gap_from: u64,
}

/// Header fields the session reads, and the first problem with the message's fields.
struct Header<'a> {
    seq: Option<u64>,
    sender: Option<&'a [u8]>,
    target: Option<&'a [u8]>,
    sending_time: Option<&'a [u8]>,
    poss_dup: bool,
    orig_sending_time: Option<&'a [u8]>,
    /// The values of the [`ROUTING`] tags, in that order.
    routing: [Option<&'a [u8]>; ROUTING.len()],
    /// (SessionRejectReason, RefTagID) of the first malformed field.
    problem: Option<(u32, Option<u32>)>,
}

/// Third-party routing tags and the tag a reply carries each value back in.
const ROUTING: [(u32, u32); 6] = [
    (tags::ON_BEHALF_OF_COMP_ID, tags::DELIVER_TO_COMP_ID),
    (tags::ON_BEHALF_OF_SUB_ID, tags::DELIVER_TO_SUB_ID),
    (tags::ON_BEHALF_OF_LOCATION_ID, tags::DELIVER_TO_LOCATION_ID),
    (tags::DELIVER_TO_COMP_ID, tags::ON_BEHALF_OF_COMP_ID),
    (tags::DELIVER_TO_SUB_ID, tags::ON_BEHALF_OF_SUB_ID),
    (tags::DELIVER_TO_LOCATION_ID, tags::ON_BEHALF_OF_LOCATION_ID),
];

/// Header tags that may appear once only.
const HEADER_TAGS: [u32; 11] = [
    tags::BEGIN_STRING,
    tags::BODY_LENGTH,
    tags::MSG_TYPE,
    tags::MSG_SEQ_NUM,
    tags::SENDER_COMP_ID,
    tags::TARGET_COMP_ID,
    tags::SENDING_TIME,
    tags::POSS_DUP_FLAG,
    tags::POSS_RESEND,
    tags::ORIG_SENDING_TIME,
    tags::CHECK_SUM,
];

/// Reads the header fields in one pass over `tag=value<SOH>` chunks. Unlike [`Fields`], it
/// goes on after a malformed chunk, so that a bad field does not hide MsgSeqNum.
fn scan_header<'a>(frame: &Frame<'a>) -> Header<'a> {
    let mut h = Header {
        seq: None,
        sender: None,
        target: None,
        sending_time: None,
        poss_dup: false,
        orig_sending_time: None,
        routing: [None; ROUTING.len()],
        problem: None,
    };
    let mut seen = [false; HEADER_TAGS.len()];
    let mut seq_seen = false;
    // The tag of the last well-formed field: a chunk without `=` after it is the rest of its
    // value, cut by an SOH (case 14k).
    let mut last_tag = None;
    for chunk in frame.body_after_msg_type().split(|&b| b == SOH) {
        if chunk.is_empty() {
            continue; // the split after the last SOH
        }
        let Some(eq) = chunk.iter().position(|&b| b == b'=') else {
            h.problem.get_or_insert(match last_tag {
                Some(tag) => (
                    reject_reason::NON_DATA_VALUE_INCLUDES_FIELD_DELIMITER,
                    Some(tag),
                ),
                None => (reject_reason::INVALID_TAG_NUMBER, None),
            });
            continue;
        };
        let tag = match parse_uint(&chunk[..eq]) {
            Some(t) if (1..=999_999_999).contains(&t) && chunk[0] != b'0' => t as u32,
            _ => {
                h.problem
                    .get_or_insert((reject_reason::INVALID_TAG_NUMBER, None));
                last_tag = None;
                continue;
            }
        };
        last_tag = Some(tag);
        let value = &chunk[eq + 1..];
        if value.is_empty() {
            h.problem
                .get_or_insert((reject_reason::TAG_WITHOUT_VALUE, Some(tag)));
            match tag {
                tags::MSG_SEQ_NUM => seq_seen = true,
                // Present but empty: reason 4, not a wrong CompID.
                tags::SENDER_COMP_ID => h.sender = Some(b""),
                tags::TARGET_COMP_ID => h.target = Some(b""),
                _ => {}
            }
            continue;
        }
        if let Some(i) = HEADER_TAGS.iter().position(|&t| t == tag) {
            if seen[i] {
                h.problem
                    .get_or_insert((reject_reason::TAG_APPEARS_MORE_THAN_ONCE, Some(tag)));
                continue;
            }
            seen[i] = true;
        }
        match tag {
            tags::MSG_SEQ_NUM if !seq_seen => {
                seq_seen = true;
                h.seq = parse_uint(value).filter(|&n| n > 0);
            }
            tags::SENDER_COMP_ID => h.sender = Some(value),
            tags::TARGET_COMP_ID => h.target = Some(value),
            tags::SENDING_TIME => h.sending_time = Some(value),
            tags::ORIG_SENDING_TIME => h.orig_sending_time = Some(value),
            tags::ON_BEHALF_OF_COMP_ID => h.routing[0] = Some(value),
            tags::ON_BEHALF_OF_SUB_ID => h.routing[1] = Some(value),
            tags::ON_BEHALF_OF_LOCATION_ID => h.routing[2] = Some(value),
            tags::DELIVER_TO_COMP_ID => h.routing[3] = Some(value),
            tags::DELIVER_TO_SUB_ID => h.routing[4] = Some(value),
            tags::DELIVER_TO_LOCATION_ID => h.routing[5] = Some(value),
            tags::POSS_DUP_FLAG => match value {
                b"Y" => h.poss_dup = true,
                b"N" => {}
                _ => {
                    h.problem.get_or_insert((
                        reject_reason::INCORRECT_DATA_FORMAT,
                        Some(tags::POSS_DUP_FLAG),
                    ));
                }
            },
            _ => {}
        }
    }
    h
}

/// Session-level message types that are never stored and are gap-filled on resend.
fn is_gap_filled_type(msg_type: &[u8]) -> bool {
    matches!(msg_type, b"0" | b"1" | b"2" | b"4" | b"5" | b"A")
}

/// A required field of a session message: its value, or the Reject reason and tag.
fn required<'a>(frame: &Frame<'a>, tag: u32) -> Result<&'a [u8], (u32, u32)> {
    frame
        .get(tag)
        .ok_or((reject_reason::REQUIRED_TAG_MISSING, tag))
}

fn required_uint(frame: &Frame<'_>, tag: u32) -> Result<u64, (u32, u32)> {
    parse_uint(required(frame, tag)?).ok_or((reject_reason::INCORRECT_DATA_FORMAT, tag))
}

impl<S: MessageStore> Session<S> {
    /// A session in the disconnected state; the sequence numbers are the store's.
    pub fn new(config: SessionConfig, store: S) -> Session<S> {
        let default_appl_version = config
            .version
            .appl_version()
            .unwrap_or(ApplVersion::Fix50Sp2);
        Session {
            config,
            store,
            log: None,
            state: State::Disconnected,
            heart_bt_int_ns: 0,
            last_sent_ns: 0,
            last_received_ns: 0,
            test_request_sent_ns: None,
            resend_until: None,
            resend_end: 0,
            garbled_count: 0,
            disconnect_reason: None,
            resending: None,
            scratch: Vec::new(),
            store_error: None,
            default_appl_version,
            queued: BTreeMap::new(),
            queued_bytes: 0,
            reply_routing: Vec::new(),
        }
    }

    /// Logs every message in and out to `log` from now on.
    pub fn with_log(mut self, log: MessageLog) -> Session<S> {
        self.log = Some(log);
        self
    }

    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Logged on (and not logging out): application messages go out at once.
    pub fn is_logged_on(&self) -> bool {
        self.state == State::LoggedOn
    }

    /// Connected (awaiting Logon, logged on, or logging out).
    pub fn is_connected(&self) -> bool {
        self.state != State::Disconnected
    }

    /// The MsgSeqNum our next message will carry.
    pub fn next_sender_seq(&self) -> u64 {
        self.store.next_sender_seq()
    }

    /// The MsgSeqNum expected from the counterparty next.
    pub fn next_target_seq(&self) -> u64 {
        self.store.next_target_seq()
    }

    /// The application version of messages that carry no ApplVerID (1128), ours included: a
    /// FIX 4.x session's own; on FIXT.1.1, the DefaultApplVerID (1137) of the last Logon
    /// accepted (FIX 5.0SP2 before the first).
    pub fn default_appl_version(&self) -> ApplVersion {
        self.default_appl_version
    }

    /// The application version of a message of theirs: on FIXT.1.1, the one its ApplVerID
    /// (1128) names, or [`Session::default_appl_version`] without one; a FIX 4.x session's own.
    /// `None` for an ApplVerID other than 7, 8 or 9: the caller rejects the message (reason 5,
    /// tag 1128).
    pub fn appl_version_of(&self, frame: &Frame<'_>) -> Option<ApplVersion> {
        match frame.get(tags::APPL_VER_ID) {
            Some(id) if self.config.version == Version::Fixt11 => ApplVersion::over_fixt(id),
            _ => Some(self.default_appl_version),
        }
    }

    /// The HeartBtInt agreed at Logon, in seconds (0 before Logon or when none).
    pub fn heart_bt_int_s(&self) -> u32 {
        (self.heart_bt_int_ns / 1_000_000_000) as u32
    }

    /// Whether a ResendRequest of ours is waiting for its messages.
    pub fn resend_pending(&self) -> bool {
        self.resend_until.is_some()
    }

    /// How many garbled chunks were reported through [`Session::on_garbled`].
    /// Whether a resend of ours is not fully written yet ([`Session::pump_resend`]).
    pub fn is_resending(&self) -> bool {
        self.resending.is_some()
    }

    /// Writes the next part of a resend in progress, about `max_bytes` of it (at least one
    /// message). Call it when the counterparty has read what was written before.
    pub fn pump_resend(
        &mut self,
        now_ns: i64,
        out: &mut Vec<u8>,
        max_bytes: usize,
    ) -> Result<(), SessionError> {
        let pumped = self.write_resend(now_ns, out, max_bytes);
        let flushed = self.flush();
        pumped?;
        flushed
    }

    pub fn garbled_count(&self) -> u64 {
        self.garbled_count
    }

    /// Why the session last asked to disconnect.
    pub fn disconnect_reason(&self) -> Option<&str> {
        self.disconnect_reason.as_deref()
    }

    /// A connection was accepted: a Logon is expected within `logon_timeout_ns`.
    pub fn on_connect(&mut self, now_ns: i64) {
        self.state = State::AwaitingLogon { since_ns: now_ns };
        self.last_received_ns = now_ns;
        self.last_sent_ns = now_ns;
        self.test_request_sent_ns = None;
        self.resend_until = None;
        self.resending = None;
        self.disconnect_reason = None;
        self.clear_queue();
    }

    /// The connection is gone (whoever closed it). With `reset_on_disconnect`, both sequence
    /// numbers go back to 1 and the stored messages are dropped.
    pub fn on_disconnect(&mut self, _now_ns: i64) -> Result<(), SessionError> {
        self.state = State::Disconnected;
        self.heart_bt_int_ns = 0;
        self.test_request_sent_ns = None;
        self.resend_until = None;
        self.resending = None;
        self.clear_queue();
        if self.config.reset_on_disconnect {
            self.store.reset().map_err(SessionError::Store)?;
        }
        self.flush()
    }

    /// Garbled input (`next_frame` returned `Err`): ignored as FIX says (no Reject, no sequence
    /// number consumed); counted and logged as [`Direction::InGarbled`].
    pub fn on_garbled(&mut self, bytes: &[u8], now_ns: i64) -> Result<(), SessionError> {
        self.garbled_count += 1;
        if let Some(log) = &mut self.log {
            log.append(Direction::InGarbled, now_ns, bytes);
        }
        self.flush()
    }

    /// One whole message from the counterparty. Messages for the counterparty are appended to
    /// `out`. `auth` is called for a Logon that passed the session checks; an `Err(text)`
    /// refuses it: the connection is closed without a message (case 1S.c), and
    /// [`Session::disconnect_reason`] is "Logon refused: `text`".
    pub fn on_message(
        &mut self,
        frame: &Frame<'_>,
        now_ns: i64,
        auth: &mut dyn FnMut(&Logon<'_>) -> Result<(), String>,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, SessionError> {
        if let Some(log) = &mut self.log {
            log.append(Direction::In, now_ns, frame.bytes);
        }
        let outcome = self.handle(frame, now_ns, auth, out, false);
        let flushed = self.flush();
        let outcome = outcome?;
        flushed?;
        Ok(outcome)
    }

    /// The next message that arrived above a gap, once the gap below it is filled (messages
    /// the gap fill skipped are dropped). Call it after every [`Session::on_message`] until
    /// `None`, and hand each to [`Session::on_queued_message`]: they are processed in order.
    ///
    /// When the range our ResendRequest asked for has all come and a gap remains below what
    /// was seen (messages dropped past `max_queued_bytes`, or not queued), it asks again, to the
    /// end: that ResendRequest goes to `out`.
    pub fn next_queued(
        &mut self,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<Option<Vec<u8>>, SessionError> {
        if self.state != State::LoggedOn {
            return Ok(None);
        }
        let expected = self.store.next_target_seq();
        while let Some(entry) = self.queued.first_entry() {
            if *entry.key() > expected {
                break;
            }
            let found = *entry.key() == expected;
            let bytes = entry.remove();
            self.queued_bytes -= bytes.len();
            if found {
                return Ok(Some(bytes));
            }
        }
        if self
            .resend_until
            .is_some_and(|until| expected > self.resend_end && expected <= until)
        {
            self.write_resend_request(expected, 0, now_ns, out);
            self.flush()?;
        }
        Ok(None)
    }

    /// Whether messages above a gap are waiting for it to be filled.
    pub fn queued_count(&self) -> usize {
        self.queued.len()
    }

    /// A message from [`Session::next_queued`]: handled as it would have been in sequence
    /// (it was logged, and its SendingTime and CompIDs checked, when it arrived).
    pub fn on_queued_message(
        &mut self,
        frame: &Frame<'_>,
        now_ns: i64,
        auth: &mut dyn FnMut(&Logon<'_>) -> Result<(), String>,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, SessionError> {
        let outcome = self.handle(frame, now_ns, auth, out, true);
        let flushed = self.flush();
        let outcome = outcome?;
        flushed?;
        Ok(outcome)
    }

    /// Encodes the reply routing of the message being handled (see `reply_routing`).
    fn set_reply_routing(&mut self, h: &Header<'_>) {
        for (&(_, reply_tag), value) in ROUTING.iter().zip(h.routing) {
            if let Some(value) = value {
                self.reply_routing
                    .extend_from_slice(reply_tag.to_string().as_bytes());
                self.reply_routing.push(b'=');
                self.reply_routing.extend_from_slice(value);
                self.reply_routing.push(SOH);
            }
        }
    }

    fn clear_queue(&mut self) {
        self.queued.clear();
        self.queued_bytes = 0;
    }

    /// Keeps a message that arrived above a gap, within `max_queued_bytes`; beyond it the
    /// message is dropped, and asked for again ([`Session::next_queued`]).
    /// Returns whether it is queued (or was already).
    fn queue(&mut self, seq: u64, bytes: &[u8]) -> bool {
        if self.queued.contains_key(&seq) {
            return true;
        }
        if self.queued_bytes + bytes.len() > self.config.max_queued_bytes {
            return false;
        }
        self.queued_bytes += bytes.len();
        self.queued.insert(seq, bytes.to_vec());
        true
    }

    /// Heartbeats, TestRequests and timeouts; call it every 100 ms or so, or at
    /// [`Session::next_deadline_ns`].
    pub fn on_timer(&mut self, now_ns: i64, out: &mut Vec<u8>) -> Result<Outcome, SessionError> {
        let outcome = self.timer(now_ns, out);
        let flushed = self.flush();
        let outcome = outcome?;
        flushed?;
        Ok(outcome)
    }

    /// The earliest time at which [`Session::on_timer`] has something to do, if any.
    pub fn next_deadline_ns(&self) -> Option<i64> {
        match self.state {
            State::Disconnected => None,
            State::AwaitingLogon { since_ns } => {
                Some(since_ns.saturating_add(self.config.logon_timeout_ns))
            }
            State::LogoutSent { at_ns } | State::LogoutReceived { at_ns } => {
                Some(at_ns.saturating_add(self.config.logout_timeout_ns))
            }
            State::LoggedOn if self.heart_bt_int_ns == 0 => None,
            State::LoggedOn => {
                let heartbeat = self.last_sent_ns.saturating_add(self.heart_bt_int_ns);
                let quiet = match self.test_request_sent_ns {
                    Some(sent) => sent.saturating_add(self.silence_limit_ns()),
                    None => self
                        .last_received_ns
                        .saturating_add(self.silence_limit_ns()),
                };
                Some(heartbeat.min(quiet))
            }
        }
    }

    /// Sends an application message: assigns the MsgSeqNum, writes the standard header (8, 9,
    /// 35, 49, 56, 34, 52), lets `body` write the rest, and stores the message for resends.
    /// It is appended to `out` only when logged on; otherwise it is only stored, and the
    /// counterparty gets it by ResendRequest after its next Logon. Returns the MsgSeqNum.
    /// `msg_type` must be an application type (a session-level one would be gap-filled on
    /// resend).
    pub fn send_app(
        &mut self,
        msg_type: &[u8],
        now_ns: i64,
        body: impl FnOnce(&mut MessageWriter<'_>),
        out: &mut Vec<u8>,
    ) -> Result<u64, SessionError> {
        let seq = self.send_stored(msg_type, now_ns, body, out, false, false)?;
        self.flush()?;
        Ok(seq)
    }

    /// [`Session::send_app`] for a reply to the message just handled (the one of the last
    /// [`Session::on_message`]): it also carries that message's third-party routing back
    /// (OnBehalfOfCompID 115 as DeliverToCompID 128, 116 as 129, 144 as 145, and the other
    /// way round).
    pub fn send_reply(
        &mut self,
        msg_type: &[u8],
        now_ns: i64,
        body: impl FnOnce(&mut MessageWriter<'_>),
        out: &mut Vec<u8>,
    ) -> Result<u64, SessionError> {
        let seq = self.send_stored(msg_type, now_ns, body, out, false, true)?;
        self.flush()?;
        Ok(seq)
    }

    /// Sends a session Reject (35=3) for an in-sequence message (stored and resent like an
    /// application message). For the application layer's validation; the session uses it too.
    pub fn reject(
        &mut self,
        reject: &Reject<'_>,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<u64, SessionError> {
        let seq = self.write_reject(reject, now_ns, out)?;
        self.flush()?;
        Ok(seq)
    }

    /// Sends a BusinessMessageReject (35=j) for the message just handled, with its reverse
    /// routing ([`Session::send_reply`]); FIX 4.0 and 4.1 have none, so there it is a session
    /// Reject whose Text says what was rejected (as QuickFIX does).
    pub fn business_reject(
        &mut self,
        reject: &BusinessReject<'_>,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<u64, SessionError> {
        if self.config.version < Version::Fix42 {
            let text = if reject.text.is_empty() {
                "business reject"
            } else {
                reject.text
            };
            let session_reject = Reject {
                ref_seq_num: reject.ref_seq_num,
                ref_tag: None,
                ref_msg_type: Some(reject.ref_msg_type),
                reason: reject_reason::OTHER,
                text,
            };
            return self.reject(&session_reject, now_ns, out);
        }
        self.send_reply(
            b"j",
            now_ns,
            |w| {
                w.uint(tags::REF_SEQ_NUM, reject.ref_seq_num);
                w.str(tags::REF_MSG_TYPE, reject.ref_msg_type);
                if let Some(id) = reject.ref_id {
                    w.str(tags::BUSINESS_REJECT_REF_ID, id);
                }
                w.uint(tags::BUSINESS_REJECT_REASON, u64::from(reject.reason));
                if !reject.text.is_empty() {
                    w.str(tags::TEXT, reject.text.as_bytes());
                }
            },
            out,
        )
    }

    /// Starts a logout of our own (shutdown): sends Logout and waits for the counterparty's
    /// (then [`Outcome::Disconnect`] from `on_message`) or for `logout_timeout_ns` (then from
    /// `on_timer`). Not logged on: nothing is sent and the answer is `Disconnect`.
    pub fn logout(
        &mut self,
        text: &str,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, SessionError> {
        match self.state {
            State::LoggedOn => {}
            State::Disconnected => return Ok(Outcome::Disconnect),
            State::LogoutReceived { .. } => {
                // The Logouts were exchanged already.
                self.state = State::Disconnected;
                return Ok(Outcome::Disconnect);
            }
            State::AwaitingLogon { .. } | State::LogoutSent { .. } => {
                self.state = State::Disconnected;
                self.disconnect_reason = Some(format!("logout before logon: {text}"));
                return Ok(Outcome::Disconnect);
            }
        }
        self.write_logout(text, now_ns, out);
        self.state = State::LogoutSent { at_ns: now_ns };
        self.flush()?;
        Ok(Outcome::Handled)
    }

    /// Hands buffered store and log writes to the OS. With `defer_flush`, call it before
    /// writing the output of earlier calls to the socket.
    pub fn flush_stores(&mut self) -> Result<(), SessionError> {
        if let Some(e) = self.store_error.take() {
            return Err(SessionError::Store(e));
        }
        self.store.flush().map_err(SessionError::Store)?;
        if let Some(log) = &mut self.log {
            log.flush().map_err(SessionError::Log)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SessionError> {
        if self.config.defer_flush {
            return match self.store_error.take() {
                Some(e) => Err(SessionError::Store(e)),
                None => Ok(()),
            };
        }
        if let Some(e) = self.store_error.take() {
            return Err(SessionError::Store(e));
        }
        self.store.flush().map_err(SessionError::Store)?;
        if let Some(log) = &mut self.log {
            log.flush().map_err(SessionError::Log)?;
        }
        Ok(())
    }

    fn silence_limit_ns(&self) -> i64 {
        self.heart_bt_int_ns
            .saturating_add(self.heart_bt_int_ns / 5)
    }

    fn timer(&mut self, now_ns: i64, out: &mut Vec<u8>) -> Result<Outcome, SessionError> {
        match self.state {
            State::Disconnected => Ok(Outcome::Handled),
            State::AwaitingLogon { since_ns } => {
                if now_ns.saturating_sub(since_ns) >= self.config.logon_timeout_ns {
                    return Ok(self.disconnect("no Logon within the logon timeout"));
                }
                Ok(Outcome::Handled)
            }
            State::LogoutSent { at_ns } => {
                if now_ns.saturating_sub(at_ns) >= self.config.logout_timeout_ns {
                    return Ok(self.disconnect("no reply to our Logout within the logout timeout"));
                }
                Ok(Outcome::Handled)
            }
            State::LogoutReceived { at_ns } => {
                if now_ns.saturating_sub(at_ns) >= self.config.logout_timeout_ns {
                    return Ok(self.disconnect(
                        "the counterparty logged out and did not disconnect within the logout timeout",
                    ));
                }
                Ok(Outcome::Handled)
            }
            State::LoggedOn if self.heart_bt_int_ns == 0 => Ok(Outcome::Handled),
            State::LoggedOn => {
                let limit = self.silence_limit_ns();
                match self.test_request_sent_ns {
                    Some(sent) if now_ns.saturating_sub(sent) >= limit => {
                        return Ok(self.disconnect("TestRequest unanswered"));
                    }
                    None if now_ns.saturating_sub(self.last_received_ns) >= limit => {
                        // This session's own: the TestRequest's MsgSeqNum and SendingTime.
                        let mut id = format!("TEST-{}-", self.store.next_sender_seq()).into_bytes();
                        time::write_utc_timestamp(&mut id, now_ns);
                        self.write_admin(b"1", now_ns, out, |w| {
                            w.str(tags::TEST_REQ_ID, &id);
                        });
                        self.test_request_sent_ns = Some(now_ns);
                    }
                    _ => {}
                }
                if now_ns.saturating_sub(self.last_sent_ns) >= self.heart_bt_int_ns {
                    self.write_admin(b"0", now_ns, out, |_| {});
                }
                Ok(Outcome::Handled)
            }
        }
    }

    fn disconnect(&mut self, reason: &str) -> Outcome {
        self.state = State::Disconnected;
        self.disconnect_reason = Some(reason.to_string());
        Outcome::Disconnect
    }

    /// Logout with `text`, then close.
    fn logout_and_disconnect(&mut self, text: &str, now_ns: i64, out: &mut Vec<u8>) -> Outcome {
        self.write_logout(text, now_ns, out);
        self.disconnect(text)
    }

    fn handle(
        &mut self,
        frame: &Frame<'_>,
        now_ns: i64,
        auth: &mut dyn FnMut(&Logon<'_>) -> Result<(), String>,
        out: &mut Vec<u8>,
        queued: bool,
    ) -> Result<Outcome, SessionError> {
        self.reply_routing.clear();
        match self.state {
            State::Disconnected => return Ok(Outcome::Disconnect),
            // Logouts exchanged: whatever comes before they disconnect is ignored (case 13b).
            State::LogoutReceived { .. } => return Ok(Outcome::Handled),
            State::AwaitingLogon { .. } if frame.msg_type != b"A" => {
                return Ok(self.disconnect("the first message was not a Logon"));
            }
            _ => {}
        }
        self.last_received_ns = now_ns;
        self.test_request_sent_ns = None;
        if frame.begin_string != self.config.version.begin_string() {
            let text = format!(
                "Incorrect BeginString: expected {}",
                self.config.version.name()
            );
            return Ok(self.logout_and_disconnect(&text, now_ns, out));
        }
        let h = scan_header(frame);
        self.set_reply_routing(&h);
        let gap_fill = frame.get(tags::GAP_FILL_FLAG) == Some(b"Y");
        // A SequenceReset-Reset is processed whatever its MsgSeqNum (case 11).
        let reset = frame.msg_type == b"4" && !gap_fill;
        let seq = match h.seq {
            Some(seq) => seq,
            None if reset => 0,
            None => {
                return Ok(self.logout_and_disconnect(
                    "MsgSeqNum (34) missing or invalid",
                    now_ns,
                    out,
                ));
            }
        };
        if frame.msg_type == b"A" {
            return self.on_logon(frame, &h, seq, now_ns, auth, out);
        }
        let msg_type = frame.msg_type;
        let reject = |reason, tag: Option<u32>| Reject {
            ref_seq_num: seq,
            ref_tag: tag,
            ref_msg_type: Some(msg_type),
            reason,
            text: reject_reason::text(reason),
        };
        // A queued message had its SendingTime checked when it arrived.
        if !queued && let Err((reason, text)) = self.check_sending_time(&h, now_ns) {
            self.write_reject(&reject(reason, Some(tags::SENDING_TIME)), now_ns, out)?;
            return Ok(self.logout_and_disconnect(text, now_ns, out));
        }
        let expected = self.store.next_target_seq();
        // A missing or empty CompID is a bad field, not the wrong counterparty: Reject (1 or
        // 4), and the session goes on.
        for (tag, value) in [
            (tags::SENDER_COMP_ID, h.sender),
            (tags::TARGET_COMP_ID, h.target),
        ] {
            let reason = match value {
                None => reject_reason::REQUIRED_TAG_MISSING,
                Some(b"") => reject_reason::TAG_WITHOUT_VALUE,
                Some(_) => continue,
            };
            self.write_reject(&reject(reason, Some(tag)), now_ns, out)?;
            if seq == expected {
                self.advance_target(seq + 1)?;
            }
            return Ok(Outcome::Handled);
        }
        if let Err(tag) = self.check_comp_ids(&h) {
            let r = reject(reject_reason::COMP_ID_PROBLEM, Some(tag));
            self.write_reject(&r, now_ns, out)?;
            return Ok(self.logout_and_disconnect(r.text, now_ns, out));
        }
        match msg_type {
            b"4" if reset => return self.on_sequence_reset(frame, seq, false, now_ns, out),
            b"5" => return self.on_logout(seq, now_ns, out),
            _ => {}
        }
        if seq > expected {
            if msg_type == b"2" {
                // Case 20: serve their ResendRequest before asking for ours. It is not
                // queued: its number comes back gap-filled.
                if let Ok((begin, end)) = resend_range(frame) {
                    self.resend(begin, end, now_ns, out)?;
                }
                self.request_resend(seq, false, now_ns, out);
            } else {
                // Kept, and processed once the gap below it is filled ([`Session::next_queued`]).
                let queued = self.queue(seq, frame.bytes);
                self.request_resend(seq, queued, now_ns, out);
            }
            return Ok(Outcome::Handled);
        }
        if seq < expected {
            if !h.poss_dup {
                let text = format!("MsgSeqNum too low, expecting {expected} but received {seq}");
                return Ok(self.logout_and_disconnect(&text, now_ns, out));
            }
            if msg_type != b"4" {
                match self.check_poss_dup(&h) {
                    Ok(()) => {}
                    Err(PossDupProblem::Missing) => {
                        let r = reject(
                            reject_reason::REQUIRED_TAG_MISSING,
                            Some(tags::ORIG_SENDING_TIME),
                        );
                        self.write_reject(&r, now_ns, out)?;
                    }
                    Err(PossDupProblem::Format) => {
                        let r = reject(
                            reject_reason::INCORRECT_DATA_FORMAT,
                            Some(tags::ORIG_SENDING_TIME),
                        );
                        self.write_reject(&r, now_ns, out)?;
                    }
                    Err(PossDupProblem::Later) => {
                        let text = "OrigSendingTime (122) later than SendingTime (52)";
                        let r = reject(
                            reject_reason::SENDING_TIME_ACCURACY,
                            Some(tags::ORIG_SENDING_TIME),
                        );
                        self.write_reject(&r, now_ns, out)?;
                        return Ok(self.logout_and_disconnect(text, now_ns, out));
                    }
                }
            }
            return Ok(Outcome::Handled);
        }
        // In sequence.
        if h.poss_dup && msg_type != b"4" {
            let problem = match self.check_poss_dup(&h) {
                Ok(()) => None,
                Err(PossDupProblem::Missing) => Some(reject(
                    reject_reason::REQUIRED_TAG_MISSING,
                    Some(tags::ORIG_SENDING_TIME),
                )),
                Err(PossDupProblem::Format) => Some(reject(
                    reject_reason::INCORRECT_DATA_FORMAT,
                    Some(tags::ORIG_SENDING_TIME),
                )),
                Err(PossDupProblem::Later) => {
                    let text = "OrigSendingTime (122) later than SendingTime (52)";
                    let r = reject(
                        reject_reason::SENDING_TIME_ACCURACY,
                        Some(tags::ORIG_SENDING_TIME),
                    );
                    self.write_reject(&r, now_ns, out)?;
                    self.advance_target(seq + 1)?;
                    return Ok(self.logout_and_disconnect(text, now_ns, out));
                }
            };
            if let Some(r) = problem {
                self.write_reject(&r, now_ns, out)?;
                self.advance_target(seq + 1)?;
                return Ok(Outcome::Handled);
            }
        }
        if let Some((reason, tag)) = h.problem {
            self.write_reject(&reject(reason, tag), now_ns, out)?;
            self.advance_target(seq + 1)?;
            return Ok(Outcome::Handled);
        }
        // Session messages are checked against the dictionary here (case 14); application
        // ones by the application, which may decode in the same pass. Not a Reject (never
        // answered with a Reject), a Logon or a Logout (handled above).
        if matches!(msg_type, b"0" | b"1" | b"2" | b"4")
            && let Err(v) = crate::dict::validate_with(
                self.default_appl_version,
                frame,
                self.config.validation(),
            )
        {
            let r = Reject {
                text: v.text,
                ..reject(v.reason, v.ref_tag)
            };
            self.write_reject(&r, now_ns, out)?;
            self.advance_target(seq + 1)?;
            return Ok(Outcome::Handled);
        }
        self.dispatch(frame, seq, now_ns, out)
    }

    /// An in-sequence message with a good header.
    fn dispatch(
        &mut self,
        frame: &Frame<'_>,
        seq: u64,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, SessionError> {
        let msg_type = frame.msg_type;
        let field_reject = |(reason, tag): (u32, u32)| Reject {
            ref_seq_num: seq,
            ref_tag: Some(tag),
            ref_msg_type: Some(msg_type),
            reason,
            text: reject_reason::text(reason),
        };
        match msg_type {
            b"0" | b"3" => {}
            b"1" => match required(frame, tags::TEST_REQ_ID) {
                Ok(id) => self.write_admin(b"0", now_ns, out, |w| {
                    w.str(tags::TEST_REQ_ID, id);
                }),
                Err(e) => {
                    self.write_reject(&field_reject(e), now_ns, out)?;
                }
            },
            b"2" => match resend_range(frame) {
                Ok((begin, end)) => self.resend(begin, end, now_ns, out)?,
                Err(e) => {
                    self.write_reject(&field_reject(e), now_ns, out)?;
                }
            },
            b"4" => return self.on_sequence_reset(frame, seq, true, now_ns, out),
            _ => {
                self.advance_target(seq + 1)?;
                return Ok(Outcome::Deliver);
            }
        }
        self.advance_target(seq + 1)?;
        Ok(Outcome::Handled)
    }

    fn on_logon(
        &mut self,
        frame: &Frame<'_>,
        h: &Header<'_>,
        seq: u64,
        now_ns: i64,
        auth: &mut dyn FnMut(&Logon<'_>) -> Result<(), String>,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, SessionError> {
        // ResetSeqNumFlag appeared in FIX 4.1: FIX 4.0 has no such field.
        let reset = self.config.version >= Version::Fix41
            && frame.get(tags::RESET_SEQ_NUM_FLAG) == Some(b"Y");
        // A Logon refused: Logout with the Text (case 1S.d), or, for an identity not
        // configured or not authenticated, closed without a message (case 1S.c).
        let refuse = |text: String| Err::<Logon<'_>, LogonRefusal>(LogonRefusal::Logout(text));
        let unknown = |text: String| Err::<Logon<'_>, LogonRefusal>(LogonRefusal::Silent(text));
        let checked = (|| {
            if matches!(self.state, State::LoggedOn | State::LogoutSent { .. }) && !reset {
                return refuse("Logon received while logged on".into());
            }
            if self.check_comp_ids(h).is_err() {
                return unknown("CompID problem".into());
            }
            if let Err((_, text)) = self.check_sending_time(h, now_ns) {
                return refuse(text.into());
            }
            let heart_bt_int = match frame.get(tags::HEART_BT_INT).and_then(parse_uint) {
                Some(n) if n <= u64::from(self.config.max_heart_bt_int_s) => n as u32,
                Some(_) => {
                    return refuse(format!(
                        "HeartBtInt (108) above the maximum of {} s",
                        self.config.max_heart_bt_int_s
                    ));
                }
                None => return refuse("HeartBtInt (108) missing or invalid".into()),
            };
            if let Some(method) = frame.get(tags::ENCRYPT_METHOD)
                && method != b"0"
            {
                return Err(LogonRefusal::Encrypt);
            }
            let default_appl_ver_id = frame.get(tags::DEFAULT_APPL_VER_ID);
            if self.config.version == Version::Fixt11 {
                match default_appl_ver_id {
                    Some(id) if ApplVersion::over_fixt(id).is_some() => {}
                    Some(id) => {
                        return refuse(format!(
                            "DefaultApplVerID (1137) {} not supported: only 7 (FIX 5.0), \
                             8 (FIX 5.0 SP1) or 9 (FIX 5.0 SP2)",
                            String::from_utf8_lossy(id)
                        ));
                    }
                    None => return refuse("DefaultApplVerID (1137) required".into()),
                }
            }
            if let Some((reason, tag)) = h.problem {
                return refuse(match tag {
                    Some(tag) => format!("Invalid Logon: reason {reason} on tag {tag}"),
                    None => format!("Invalid Logon: reason {reason}"),
                });
            }
            Ok(Logon {
                sender_comp_id: h.sender.unwrap_or_default(),
                target_comp_id: h.target.unwrap_or_default(),
                username: frame.get(tags::USERNAME),
                password: frame.get(tags::PASSWORD),
                heart_bt_int,
                reset_seq_num: reset,
                default_appl_ver_id,
            })
        })();
        let checked = checked.and_then(|logon| match auth(&logon) {
            Ok(()) => Ok(logon),
            Err(text) => Err(LogonRefusal::Silent(text)),
        });
        let logon = match checked {
            Ok(logon) => logon,
            Err(LogonRefusal::Logout(text)) => {
                return Ok(self.logout_and_disconnect(&text, now_ns, out));
            }
            Err(LogonRefusal::Silent(text)) => {
                return Ok(self.disconnect(&format!("Logon refused: {text}")));
            }
            Err(LogonRefusal::Encrypt) => {
                // Case 17b: Reject 7 (written although not logged on), the Logon's number
                // used, then the Logout.
                let r = Reject {
                    ref_seq_num: seq,
                    ref_tag: Some(tags::ENCRYPT_METHOD),
                    ref_msg_type: Some(b"A"),
                    reason: reject_reason::DECRYPTION_PROBLEM,
                    text: reject_reason::text(reject_reason::DECRYPTION_PROBLEM),
                };
                self.write_reject(&r, now_ns, out)?;
                if seq == self.store.next_target_seq() {
                    self.advance_target(seq + 1)?;
                }
                let text = "EncryptMethod (98) not supported: only 0 (none)";
                return Ok(self.logout_and_disconnect(text, now_ns, out));
            }
        };
        if reset {
            self.store.reset().map_err(SessionError::Store)?;
            self.resend_until = None;
            self.resending = None;
            self.clear_queue();
        }
        let expected = self.store.next_target_seq();
        if seq < expected {
            let text = format!("MsgSeqNum too low, expecting {expected} but received {seq}");
            return Ok(self.logout_and_disconnect(&text, now_ns, out));
        }
        self.state = State::LoggedOn;
        self.heart_bt_int_ns = i64::from(logon.heart_bt_int).saturating_mul(1_000_000_000);
        let fixt = self.config.version == Version::Fixt11;
        if let Some(id) = logon.default_appl_ver_id.filter(|_| fixt) {
            self.default_appl_version = ApplVersion::over_fixt(id).expect("checked above");
        }
        let default_appl_ver_id = self.default_appl_version.appl_ver_id();
        self.write_admin(b"A", now_ns, out, |w| {
            w.uint(tags::ENCRYPT_METHOD, 0);
            w.uint(tags::HEART_BT_INT, u64::from(logon.heart_bt_int));
            if reset {
                w.bool(tags::RESET_SEQ_NUM_FLAG, true);
            }
            if fixt {
                w.str(tags::DEFAULT_APPL_VER_ID, default_appl_ver_id);
            }
        });
        if seq == expected {
            self.advance_target(seq + 1)?;
        } else {
            self.request_resend(seq, false, now_ns, out);
        }
        Ok(Outcome::LoggedOn)
    }

    fn on_logout(
        &mut self,
        seq: u64,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, SessionError> {
        if seq == self.store.next_target_seq() {
            self.advance_target(seq + 1)?;
        }
        if let State::LogoutSent { .. } = self.state {
            return Ok(self.disconnect("Logout confirmed"));
        }
        // Case 13b: answer, then wait for them to disconnect (or `logout_timeout_ns`).
        self.write_logout("", now_ns, out);
        self.state = State::LogoutReceived { at_ns: now_ns };
        self.disconnect_reason = Some("the counterparty logged out".into());
        self.resending = None;
        self.clear_queue();
        Ok(Outcome::Handled)
    }

    /// SequenceReset; `gap_fill` ones arrive here in sequence, Reset ones whatever their number.
    fn on_sequence_reset(
        &mut self,
        frame: &Frame<'_>,
        seq: u64,
        gap_fill: bool,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<Outcome, SessionError> {
        let expected = self.store.next_target_seq();
        let mut r = Reject {
            ref_seq_num: seq,
            ref_tag: Some(tags::NEW_SEQ_NO),
            ref_msg_type: Some(b"4"),
            reason: reject_reason::VALUE_INCORRECT,
            text: reject_reason::text(reject_reason::VALUE_INCORRECT),
        };
        let new_seq = match required_uint(frame, tags::NEW_SEQ_NO) {
            Ok(n) => n,
            Err((reason, _)) => {
                r.reason = reason;
                r.text = reject_reason::text(reason);
                self.write_reject(&r, now_ns, out)?;
                if gap_fill && seq == expected {
                    self.advance_target(seq + 1)?;
                }
                return Ok(Outcome::Handled);
            }
        };
        if gap_fill {
            if new_seq <= seq {
                self.write_reject(&r, now_ns, out)?;
                self.advance_target(seq + 1)?;
            } else {
                self.advance_target(new_seq)?;
            }
        } else if new_seq < expected {
            self.write_reject(&r, now_ns, out)?;
        } else {
            self.advance_target(new_seq)?;
        }
        Ok(Outcome::Handled)
    }

    fn check_sending_time(&self, h: &Header<'_>, now_ns: i64) -> Result<(), (u32, &'static str)> {
        let Some(text) = h.sending_time else {
            return Err((
                reject_reason::SENDING_TIME_ACCURACY,
                "SendingTime (52) missing",
            ));
        };
        let Some(sent) = time::parse_utc_timestamp(text) else {
            return Err((
                reject_reason::SENDING_TIME_ACCURACY,
                "SendingTime (52) is not a UTCTimestamp",
            ));
        };
        if sent.abs_diff(now_ns) > self.config.max_clock_skew_ns.unsigned_abs() {
            return Err((
                reject_reason::SENDING_TIME_ACCURACY,
                "SendingTime accuracy problem",
            ));
        }
        Ok(())
    }

    /// The tag that is wrong, if one is.
    fn check_comp_ids(&self, h: &Header<'_>) -> Result<(), u32> {
        if h.sender != Some(self.config.their_comp_id.as_bytes()) {
            return Err(tags::SENDER_COMP_ID);
        }
        if h.target != Some(self.config.our_comp_id.as_bytes()) {
            return Err(tags::TARGET_COMP_ID);
        }
        Ok(())
    }

    fn check_poss_dup(&self, h: &Header<'_>) -> Result<(), PossDupProblem> {
        let orig = h.orig_sending_time.ok_or(PossDupProblem::Missing)?;
        let orig = time::parse_utc_timestamp(orig).ok_or(PossDupProblem::Format)?;
        // SendingTime was checked before.
        let sent = h
            .sending_time
            .and_then(time::parse_utc_timestamp)
            .unwrap_or(i64::MAX);
        if orig > sent {
            return Err(PossDupProblem::Later);
        }
        Ok(())
    }

    fn advance_target(&mut self, next: u64) -> Result<(), SessionError> {
        self.store
            .set_next_target_seq(next)
            .map_err(SessionError::Store)?;
        if self.resend_until.is_some_and(|until| next > until) {
            self.resend_until = None;
        }
        Ok(())
    }

    /// A message numbered `seq` came beyond the expected one: ask for the gap, once while a
    /// request is pending. The gap only (BeginSeqNo = expected, EndSeqNo = `seq - 1`) when
    /// `seq` is queued, so that what we hold is not sent again; otherwise to the end
    /// (EndSeqNo = 0), `seq` included.
    fn request_resend(&mut self, seq: u64, queued: bool, now_ns: i64, out: &mut Vec<u8>) {
        if let Some(until) = &mut self.resend_until {
            *until = (*until).max(seq);
            return;
        }
        self.resend_until = Some(seq);
        let begin = self.store.next_target_seq();
        let end = if queued { seq - 1 } else { 0 };
        self.write_resend_request(begin, end, now_ns, out);
    }

    fn write_resend_request(&mut self, begin: u64, end: u64, now_ns: i64, out: &mut Vec<u8>) {
        self.resend_end = if end == 0 { u64::MAX } else { end };
        self.write_admin(b"2", now_ns, out, |w| {
            w.uint(tags::BEGIN_SEQ_NO, begin);
            w.uint(tags::END_SEQ_NO, end);
        });
    }

    /// Answers a ResendRequest for `begin..=end` (0: to the end).
    /// A ResendRequest for `begin..=end` (0: to the end). A newer request replaces one still
    /// being served, so repeated or overlapping requests hold no more than one cursor, and
    /// cost only what the counterparty reads.
    fn resend(
        &mut self,
        begin: u64,
        end: u64,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<(), SessionError> {
        let last = self.store.next_sender_seq().saturating_sub(1);
        let end = if end == 0 || end > last { last } else { end };
        let already = self.resending.is_some();
        self.resending = Some(ResendCursor {
            next: begin,
            end,
            gap_from: begin,
        });
        if already {
            return Ok(()); // the caller goes on pumping as the counterparty reads
        }
        self.write_resend(now_ns, out, self.config.resend_chunk_bytes)
    }

    /// Resends stored messages (gap-filling the rest) until `max_bytes` are written or the
    /// range is done.
    fn write_resend(
        &mut self,
        now_ns: i64,
        out: &mut Vec<u8>,
        max_bytes: usize,
    ) -> Result<(), SessionError> {
        let Some(mut c) = self.resending.take() else {
            return Ok(());
        };
        let start = out.len();
        let mut stored = std::mem::take(&mut self.scratch);
        let result = (|| {
            while c.next <= c.end {
                if out.len() - start >= max_bytes.max(1) {
                    return Ok(false);
                }
                let Some((seq, _time)) = self
                    .store
                    .read_next(c.next, c.end, &mut stored)
                    .map_err(SessionError::Store)?
                else {
                    break;
                };
                c.next = seq + 1;
                let Ok(Some((original, _))) = crate::parse::next_frame(&stored, usize::MAX) else {
                    continue; // unreadable: gap-filled
                };
                if is_gap_filled_type(original.msg_type) {
                    continue;
                }
                if c.gap_from < seq {
                    self.write_gap_fill(c.gap_from, seq, now_ns, out);
                }
                self.write_resent(&original, seq, now_ns, out);
                c.gap_from = seq + 1;
            }
            if c.gap_from <= c.end {
                self.write_gap_fill(c.gap_from, c.end + 1, now_ns, out);
            }
            Ok(true)
        })();
        self.scratch = stored;
        if let Ok(false) = result {
            self.resending = Some(c);
        }
        result.map(|_| ())
    }

    fn write_gap_fill(&mut self, seq: u64, new_seq: u64, now_ns: i64, out: &mut Vec<u8>) {
        let start = out.len();
        let mut w = MessageWriter::begin(out, self.config.version.begin_string(), b"4");
        w.str(tags::SENDER_COMP_ID, self.config.our_comp_id.as_bytes())
            .str(tags::TARGET_COMP_ID, self.config.their_comp_id.as_bytes())
            .uint(tags::MSG_SEQ_NUM, seq)
            .bool(tags::POSS_DUP_FLAG, true)
            .timestamp_in(self.config.version, tags::SENDING_TIME, now_ns)
            .timestamp_in(self.config.version, tags::ORIG_SENDING_TIME, now_ns)
            .bool(tags::GAP_FILL_FLAG, true)
            .uint(tags::NEW_SEQ_NO, new_seq);
        w.finish();
        self.sent(start, now_ns, out);
    }

    fn write_resent(&mut self, original: &Frame<'_>, seq: u64, now_ns: i64, out: &mut Vec<u8>) {
        let start = out.len();
        let mut w =
            MessageWriter::begin(out, self.config.version.begin_string(), original.msg_type);
        w.str(tags::SENDER_COMP_ID, self.config.our_comp_id.as_bytes())
            .str(tags::TARGET_COMP_ID, self.config.their_comp_id.as_bytes())
            .uint(tags::MSG_SEQ_NUM, seq)
            .bool(tags::POSS_DUP_FLAG, true)
            .timestamp_in(self.config.version, tags::SENDING_TIME, now_ns);
        if let Some(orig) = original.get(tags::SENDING_TIME) {
            w.str(tags::ORIG_SENDING_TIME, orig);
        }
        for field in Fields::over(original.body_after_msg_type()).map_while(Result::ok) {
            match field.tag {
                tags::SENDER_COMP_ID
                | tags::TARGET_COMP_ID
                | tags::MSG_SEQ_NUM
                | tags::SENDING_TIME
                | tags::POSS_DUP_FLAG
                | tags::ORIG_SENDING_TIME => {}
                tag => {
                    w.str(tag, field.value);
                }
            }
        }
        w.finish();
        self.sent(start, now_ns, out);
    }

    /// A session-level message (not stored) with the next MsgSeqNum.
    fn write_admin(
        &mut self,
        msg_type: &[u8],
        now_ns: i64,
        out: &mut Vec<u8>,
        body: impl FnOnce(&mut MessageWriter<'_>),
    ) {
        let seq = self.store.next_sender_seq();
        let start = out.len();
        let mut w = self.header(out, msg_type, seq, now_ns);
        body(&mut w);
        w.finish();
        self.bump_sender(seq);
        self.sent(start, now_ns, out);
    }

    fn write_logout(&mut self, text: &str, now_ns: i64, out: &mut Vec<u8>) {
        self.write_admin(b"5", now_ns, out, |w| {
            if !text.is_empty() {
                w.str(tags::TEXT, text.as_bytes());
            }
        });
    }

    fn write_reject(
        &mut self,
        r: &Reject<'_>,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<u64, SessionError> {
        let version = self.config.version;
        self.send_stored(
            b"3",
            now_ns,
            |w| {
                w.uint(tags::REF_SEQ_NUM, r.ref_seq_num);
                if !version.reject_has_reason() {
                    // FIX 4.0 and 4.1 Rejects have RefSeqNum and Text only: the Text says it all.
                    w.str(tags::TEXT, reject_text(r).as_bytes());
                    return;
                }
                if let Some(tag) = r.ref_tag {
                    w.uint(tags::REF_TAG_ID, u64::from(tag));
                }
                if let Some(t) = r.ref_msg_type {
                    w.str(tags::REF_MSG_TYPE, t);
                }
                w.uint(tags::SESSION_REJECT_REASON, u64::from(r.reason));
                match r.ref_tag {
                    _ if r.text.is_empty() => {}
                    // As QuickFIX/J words it: "Required tag missing, field=55".
                    Some(tag) => {
                        let text = format!("{}, field={tag}", r.text);
                        w.str(tags::TEXT, text.as_bytes());
                    }
                    None => {
                        w.str(tags::TEXT, r.text.as_bytes());
                    }
                }
            },
            out,
            true,
            true,
        )
    }

    /// A message kept for resends: written to `out` when logged on (or, for session-level
    /// ones, while a Logon is checked or our Logout waits for its answer), only stored
    /// otherwise.
    fn send_stored(
        &mut self,
        msg_type: &[u8],
        now_ns: i64,
        body: impl FnOnce(&mut MessageWriter<'_>),
        out: &mut Vec<u8>,
        session_level: bool,
        routed: bool,
    ) -> Result<u64, SessionError> {
        let seq = self.store.next_sender_seq();
        let logged_on = match self.state {
            State::LoggedOn => true,
            State::AwaitingLogon { .. } | State::LogoutSent { .. } => session_level,
            _ => false,
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        let buf = if logged_on { &mut *out } else { &mut scratch };
        if !logged_on {
            buf.clear();
        }
        let start = buf.len();
        let mut w = self.header(buf, msg_type, seq, now_ns);
        if routed {
            w.raw(&self.reply_routing);
        }
        body(&mut w);
        w.finish();
        let stored = self.store.store(seq, now_ns, &buf[start..]);
        self.scratch = scratch;
        stored.map_err(SessionError::Store)?;
        self.bump_sender(seq);
        if logged_on {
            self.sent(start, now_ns, out);
        }
        Ok(seq)
    }

    fn header<'b>(
        &self,
        buf: &'b mut Vec<u8>,
        msg_type: &[u8],
        seq: u64,
        now_ns: i64,
    ) -> MessageWriter<'b> {
        let mut w = MessageWriter::begin(buf, self.config.version.begin_string(), msg_type);
        w.str(tags::SENDER_COMP_ID, self.config.our_comp_id.as_bytes())
            .str(tags::TARGET_COMP_ID, self.config.their_comp_id.as_bytes())
            .uint(tags::MSG_SEQ_NUM, seq)
            .timestamp_in(self.config.version, tags::SENDING_TIME, now_ns);
        w
    }

    fn bump_sender(&mut self, seq: u64) {
        // Reported by the flush that ends every call.
        if let Err(e) = self.store.set_next_sender_seq(seq + 1) {
            self.store_error.get_or_insert(e);
        }
    }

    /// Bookkeeping for a message just written at `out[start..]`.
    fn sent(&mut self, start: usize, now_ns: i64, out: &[u8]) {
        self.last_sent_ns = now_ns;
        if let Some(log) = &mut self.log {
            log.append(Direction::Out, now_ns, &out[start..]);
        }
    }
}

impl Version {
    /// Whether a session Reject (35=3) has RefTagID (371), RefMsgType (372) and
    /// SessionRejectReason (373): from FIX 4.2 on.
    fn reject_has_reason(self) -> bool {
        self >= Version::Fix42
    }
}

/// A FIX 4.0 or 4.1 Reject's Text, which stands for the fields those versions lack: the
/// Text given, else the reason, and the tag at fault.
fn reject_text(r: &Reject<'_>) -> String {
    let what = if r.text.is_empty() {
        reject_reason::text(r.reason)
    } else {
        r.text
    };
    match r.ref_tag {
        Some(tag) => format!("{what}, field={tag}"),
        None => what.to_string(),
    }
}

/// Why a Logon is refused.
enum LogonRefusal {
    /// Logout with this Text, then disconnect (case 1S.d).
    Logout(String),
    /// Disconnect without a message (case 1S.c); the disconnect reason.
    Silent(String),
    /// An EncryptMethod other than 0: Reject 7, Logout, disconnect (case 17b).
    Encrypt,
}

enum PossDupProblem {
    Missing,
    Format,
    Later,
}

/// BeginSeqNo and EndSeqNo of a ResendRequest, or the Reject reason and tag.
fn resend_range(frame: &Frame<'_>) -> Result<(u64, u64), (u32, u32)> {
    let begin = required_uint(frame, tags::BEGIN_SEQ_NO)?;
    let end = required_uint(frame, tags::END_SEQ_NO)?;
    if begin == 0 {
        return Err((reject_reason::VALUE_INCORRECT, tags::BEGIN_SEQ_NO));
    }
    if end != 0 && end < begin {
        return Err((reject_reason::VALUE_INCORRECT, tags::END_SEQ_NO));
    }
    Ok((begin, end))
}
