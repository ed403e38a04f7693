//! The FIX Trading Community's "FIX Session Layer Test Cases"
//! (https://www.fixtrading.org/standards/fix-session-testcases-online/; their numbers, such as
//! 1S.a, 2S, 2b or 14h, are in the test names) driven through the session state machine with
//! hand-built counterparty messages. docs/fix.md lists every case and how it is covered.

use rialto_fix::session::store::MessageStore;
use rialto_fix::session::{
    BusinessReject, FileStore, LogFilter, Logon, MemoryStore, MessageLog, Outcome, Reject, Session,
    SessionConfig, business_reject_reason, log, reject_reason,
};
use rialto_fix::{ApplVersion, MessageWriter, Version, next_frame, tags, time};

const NOW: i64 = 1_795_322_669_000_000_000;
const SEC: i64 = 1_000_000_000;

/// A message read back from `out`.
#[derive(Debug)]
struct Msg {
    msg_type: String,
    fields: Vec<(u32, String)>,
}

impl Msg {
    fn get(&self, tag: u32) -> Option<&str> {
        self.fields
            .iter()
            .find(|(t, _)| *t == tag)
            .map(|(_, v)| v.as_str())
    }
    fn seq(&self) -> u64 {
        self.get(tags::MSG_SEQ_NUM).unwrap().parse().unwrap()
    }
    fn num(&self, tag: u32) -> u64 {
        self.get(tag)
            .unwrap_or_else(|| panic!("tag {tag} missing in {self:?}"))
            .parse()
            .unwrap()
    }
}

/// Splits `out` into messages; every byte must belong to a well-formed message from RIALTO.
fn parse_out(mut out: &[u8]) -> Vec<Msg> {
    let mut msgs = Vec::new();
    while !out.is_empty() {
        let (frame, len) = next_frame(out, 1 << 20)
            .expect("well-formed")
            .expect("whole");
        let fields = frame
            .fields()
            .map(|f| {
                let f = f.unwrap();
                (f.tag, String::from_utf8(f.value.to_vec()).unwrap())
            })
            .collect();
        let m = Msg {
            msg_type: String::from_utf8(frame.msg_type.to_vec()).unwrap(),
            fields,
        };
        assert_eq!(m.get(tags::SENDER_COMP_ID), Some("RIALTO"));
        assert_eq!(m.get(tags::TARGET_COMP_ID), Some("TRADER1"));
        msgs.push(m);
        out = &out[len..];
    }
    msgs
}

fn ts(ns: i64) -> String {
    let mut b = Vec::new();
    time::write_utc_timestamp(&mut b, ns);
    String::from_utf8(b).unwrap()
}

/// A counterparty message with exactly these fields after MsgType.
fn raw(begin: &str, msg_type: &str, fields: &[(u32, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = MessageWriter::begin(&mut out, begin.as_bytes(), msg_type.as_bytes());
    for (tag, value) in fields {
        w.str(*tag, value.as_bytes());
    }
    w.finish();
    out
}

thread_local! {
    /// The version the tests below run in: FIX 4.4 when run alone, each version in turn
    /// from `every_version` at the end of the file.
    static VERSION: std::cell::Cell<Version> = const { std::cell::Cell::new(Version::Fix44) };
}

fn version() -> Version {
    VERSION.with(|v| v.get())
}

struct Harness {
    s: Session<MemoryStore>,
    now: i64,
    out: Vec<u8>,
    version: Version,
    auth_result: Result<(), String>,
    last_logon_user: Option<String>,
}

impl Harness {
    fn new(version: Version) -> Harness {
        Harness::with_store(version, MemoryStore::new())
    }

    fn with_store(version: Version, store: MemoryStore) -> Harness {
        let mut s = Session::new(SessionConfig::new(version, "RIALTO", "TRADER1"), store);
        s.on_connect(NOW);
        Harness {
            s,
            now: NOW,
            out: Vec::new(),
            version,
            auth_result: Ok(()),
            last_logon_user: None,
        }
    }

    /// Logged on with both sides at 1 (our Logon reply is seq 1, theirs was 1).
    fn logged_on() -> Harness {
        let mut h = Harness::new(version());
        assert_eq!(h.feed(&h.logon(1, &[])), Outcome::LoggedOn);
        h.take();
        h
    }

    /// The standard header for a message of theirs sent now.
    fn msg(&self, msg_type: &str, seq: u64, extra: &[(u32, &str)]) -> Vec<u8> {
        let seq = seq.to_string();
        let time = ts(self.now);
        let mut fields = vec![
            (tags::SENDER_COMP_ID, "TRADER1"),
            (tags::TARGET_COMP_ID, "RIALTO"),
            (tags::MSG_SEQ_NUM, seq.as_str()),
            (tags::SENDING_TIME, time.as_str()),
        ];
        fields.extend_from_slice(extra);
        raw(self.version.name(), msg_type, &fields)
    }

    fn logon(&self, seq: u64, extra: &[(u32, &str)]) -> Vec<u8> {
        let mut fields = vec![(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")];
        if self.version == Version::Fixt11 && !extra.iter().any(|(tag, _)| *tag == 1137) {
            fields.push((tags::DEFAULT_APPL_VER_ID, "9"));
        }
        fields.extend_from_slice(extra);
        self.msg("A", seq, &fields)
    }

    fn feed(&mut self, bytes: &[u8]) -> Outcome {
        let (frame, len) = next_frame(bytes, 1 << 20).unwrap().unwrap();
        assert_eq!(len, bytes.len());
        let result = self.auth_result.clone();
        let mut user = None;
        let mut auth = |logon: &Logon<'_>| {
            user = logon
                .username
                .map(|u| String::from_utf8_lossy(u).into_owned());
            result.clone()
        };
        let outcome = self
            .s
            .on_message(&frame, self.now, &mut auth, &mut self.out)
            .unwrap();
        if user.is_some() {
            self.last_logon_user = user;
        }
        outcome
    }

    /// Logged on like [`Harness::logged_on`], with `configure` applied to the settings.
    fn logged_on_with(configure: impl FnOnce(&mut SessionConfig)) -> Harness {
        let mut h = Harness::new(version());
        let mut config = h.s.config().clone();
        configure(&mut config);
        h.s = Session::new(config, MemoryStore::new());
        h.s.on_connect(h.now);
        assert_eq!(h.feed(&h.logon(1, &[])), Outcome::LoggedOn);
        h.take();
        h
    }

    /// Hands the queued messages back, as a server does after every message: their
    /// MsgSeqNums and outcomes, in order.
    fn drain_queue(&mut self) -> Vec<(u64, Outcome)> {
        let mut done = Vec::new();
        while let Some(bytes) = self.s.next_queued(self.now, &mut self.out).unwrap() {
            let (frame, _) = next_frame(&bytes, 1 << 20).unwrap().unwrap();
            let seq = std::str::from_utf8(frame.get(tags::MSG_SEQ_NUM).unwrap())
                .unwrap()
                .parse()
                .unwrap();
            let outcome = self
                .s
                .on_queued_message(&frame, self.now, &mut |_| Ok(()), &mut self.out)
                .unwrap();
            done.push((seq, outcome));
        }
        done
    }

    fn timer(&mut self) -> Outcome {
        self.s.on_timer(self.now, &mut self.out).unwrap()
    }

    /// What was written since the last take.
    fn take(&mut self) -> Vec<Msg> {
        let msgs = parse_out(&self.out);
        self.out.clear();
        msgs
    }

    fn send_order_ack(&mut self, clordid: &str) -> u64 {
        self.s
            .send_app(
                b"8",
                self.now,
                |w| {
                    w.str(tags::CL_ORD_ID, clordid.as_bytes());
                    w.char(tags::EXEC_TYPE, b'0');
                },
                &mut self.out,
            )
            .unwrap()
    }
}

fn types(msgs: &[Msg]) -> Vec<&str> {
    msgs.iter().map(|m| m.msg_type.as_str()).collect()
}

// ---- 1S, 2S: Logon (acceptor) -------------------------------------------------------------

#[test]
fn t1s_a_valid_logon_is_answered_with_logon() {
    let mut h = Harness::new(version());
    let logon = h.logon(1, &[(tags::USERNAME, "alice"), (tags::PASSWORD, "pw")]);
    assert_eq!(h.feed(&logon), Outcome::LoggedOn);
    let out = h.take();
    assert_eq!(types(&out), ["A"]);
    assert_eq!(out[0].seq(), 1);
    assert_eq!(out[0].get(tags::HEART_BT_INT), Some("30"));
    assert_eq!(out[0].get(tags::ENCRYPT_METHOD), Some("0"));
    assert_eq!(out[0].get(tags::RESET_SEQ_NUM_FLAG), None);
    assert_eq!(h.last_logon_user.as_deref(), Some("alice"));
    assert!(h.s.is_logged_on());
    assert_eq!(h.s.heart_bt_int_s(), 30);
    assert_eq!((h.s.next_sender_seq(), h.s.next_target_seq()), (2, 2));
}

#[test]
fn t1s_a_logon_with_seq_too_high_is_accepted_then_a_resend_is_requested() {
    let mut h = Harness::new(version());
    assert_eq!(h.feed(&h.logon(5, &[])), Outcome::LoggedOn);
    let out = h.take();
    assert_eq!(types(&out), ["A", "2"]);
    assert_eq!(out[1].seq(), 2);
    assert_eq!(out[1].num(tags::BEGIN_SEQ_NO), 1);
    assert_eq!(out[1].num(tags::END_SEQ_NO), 0);
    assert_eq!(h.s.next_target_seq(), 1);
    assert!(h.s.resend_pending());
}

/// 1S.c, a Logon that is not authenticated: disconnect without a message.
#[test]
fn t1s_c_refused_logon_is_closed_without_a_message() {
    let mut h = Harness::new(version());
    h.auth_result = Err("bad password".into());
    assert_eq!(h.feed(&h.logon(1, &[])), Outcome::Disconnect);
    assert!(h.out.is_empty());
    assert!(!h.s.is_logged_on());
    assert_eq!(h.s.disconnect_reason(), Some("Logon refused: bad password"));
    assert_eq!((h.s.next_sender_seq(), h.s.next_target_seq()), (1, 1));
}

/// 1S.d, an invalid Logon: a Logout with a Text, then the disconnect.
#[test]
fn t1s_d_logon_without_or_with_a_bad_heart_bt_int_is_logged_out() {
    let mut h = Harness::new(version());
    let no_hb = h.msg("A", 1, &[(tags::ENCRYPT_METHOD, "0")]);
    assert_eq!(h.feed(&no_hb), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["5"]);
    assert!(out[0].get(tags::TEXT).unwrap().contains("HeartBtInt"));

    let mut h = Harness::new(version());
    let negative = h.msg("A", 1, &[(tags::HEART_BT_INT, "-5")]);
    assert_eq!(h.feed(&negative), Outcome::Disconnect);
    assert_eq!(types(&h.take()), ["5"]);
}

/// 1S.c, a Logon from an identity not configured: disconnect without a message.
#[test]
fn t1s_c_logon_with_wrong_comp_ids_is_closed_without_a_message() {
    let mut h = Harness::new(version());
    let t = ts(NOW);
    let wrong = raw(
        version().name(),
        "A",
        &[
            (tags::SENDER_COMP_ID, "MALLORY"),
            (tags::TARGET_COMP_ID, "RIALTO"),
            (tags::MSG_SEQ_NUM, "1"),
            (tags::SENDING_TIME, &t),
            (tags::HEART_BT_INT, "30"),
        ],
    );
    assert_eq!(h.feed(&wrong), Outcome::Disconnect);
    assert!(h.out.is_empty());
    assert_eq!(
        h.s.disconnect_reason(),
        Some("Logon refused: CompID problem")
    );
    assert_eq!((h.s.next_sender_seq(), h.s.next_target_seq()), (1, 1));
}

#[test]
fn t2s_first_message_not_logon_disconnects_without_reply() {
    let mut h = Harness::new(version());
    assert_eq!(h.feed(&h.msg("0", 1, &[])), Outcome::Disconnect);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 1);
}

#[test]
fn t2c_logon_with_seq_too_low_is_logged_out() {
    let mut store = MemoryStore::new();
    store.set_next_target_seq(10).unwrap();
    store.set_next_sender_seq(4).unwrap();
    let mut h = Harness::with_store(version(), store);
    assert_eq!(h.feed(&h.logon(3, &[])), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["5"]);
    assert_eq!(out[0].seq(), 4);
    assert_eq!(
        out[0].get(tags::TEXT),
        Some("MsgSeqNum too low, expecting 10 but received 3")
    );
}

#[test]
fn logon_with_reset_seq_num_flag_resets_both_sides() {
    let mut store = MemoryStore::new();
    store.set_next_target_seq(7).unwrap();
    store.set_next_sender_seq(20).unwrap();
    store.store(19, NOW, b"old").unwrap();
    let mut h = Harness::with_store(version(), store);
    let logon = h.logon(1, &[(tags::RESET_SEQ_NUM_FLAG, "Y")]);
    assert_eq!(h.feed(&logon), Outcome::LoggedOn);
    let out = h.take();
    assert_eq!(types(&out), ["A"]);
    assert_eq!(out[0].seq(), 1);
    assert_eq!(out[0].get(tags::RESET_SEQ_NUM_FLAG), Some("Y"));
    assert_eq!((h.s.next_sender_seq(), h.s.next_target_seq()), (2, 2));
    assert!(h.s.store().is_empty());

    // A reset Logon during the session resets again; one without the flag is refused.
    h.feed(&h.msg("0", 2, &[]));
    let again = h.logon(1, &[(tags::RESET_SEQ_NUM_FLAG, "Y")]);
    assert_eq!(h.feed(&again), Outcome::LoggedOn);
    assert_eq!(h.take()[0].seq(), 1);
    assert_eq!(h.feed(&h.logon(2, &[])), Outcome::Disconnect);
    assert_eq!(types(&h.take()), ["5"]);
}

#[test]
fn fixt_logon_takes_default_appl_ver_id_7_8_or_9() {
    let mut h = Harness::new(Version::Fixt11);
    let without = h.msg(
        "A",
        1,
        &[(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")],
    );
    assert_eq!(h.feed(&without), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(
        out[0].get(tags::TEXT),
        Some("DefaultApplVerID (1137) required")
    );

    for refused in ["6", "10", "x"] {
        let mut h = Harness::new(Version::Fixt11);
        let logon = h.logon(1, &[(tags::DEFAULT_APPL_VER_ID, refused)]);
        assert_eq!(h.feed(&logon), Outcome::Disconnect);
        let text = h.take()[0].get(tags::TEXT).unwrap().to_string();
        assert!(
            text.starts_with(&format!("DefaultApplVerID (1137) {refused} not supported")),
            "{text}"
        );
    }

    for (id, appl_version) in [
        ("7", ApplVersion::Fix50),
        ("8", ApplVersion::Fix50Sp1),
        ("9", ApplVersion::Fix50Sp2),
    ] {
        let mut h = Harness::new(Version::Fixt11);
        let logon = h.logon(1, &[(tags::DEFAULT_APPL_VER_ID, id)]);
        assert_eq!(h.feed(&logon), Outcome::LoggedOn);
        let out = h.take();
        assert_eq!(out[0].get(tags::DEFAULT_APPL_VER_ID), Some(id));
        assert_eq!(h.s.default_appl_version(), appl_version);
        assert!(h.out.is_empty());
        // The session stays FIXT.1.1 whatever the application version.
        assert_eq!(h.s.config().session_name(), "FIXT.1.1-RIALTO-TRADER1");
    }
}

/// FIX 4.x sessions have their own application version, whatever a Logon says.
#[test]
fn a_fix4_session_has_its_own_application_version() {
    for version in Version::ALL.into_iter().filter(|v| *v != Version::Fixt11) {
        let mut h = Harness::new(version);
        let logon = h.logon(1, &[]);
        assert_eq!(h.feed(&logon), Outcome::LoggedOn);
        let reply = &h.take()[0];
        assert_eq!(reply.get(tags::DEFAULT_APPL_VER_ID), None);
        assert_eq!(Some(h.s.default_appl_version()), version.appl_version());
    }
}

/// FIX 4.0 and 4.1: timestamps to the second; FIX 4.0 has no ResetSeqNumFlag.
#[test]
fn fix_40_and_41_sessions_write_what_those_versions_define() {
    for version in [Version::Fix40, Version::Fix41] {
        let mut h = Harness::new(version);
        let logon = h.logon(1, &[(tags::RESET_SEQ_NUM_FLAG, "Y")]);
        assert_eq!(h.feed(&logon), Outcome::LoggedOn);
        let reply = &h.take()[0];
        assert_eq!(reply.get(tags::SENDING_TIME).unwrap().len(), 17);
        // 4.1 honours and echoes ResetSeqNumFlag; 4.0 has no such field.
        assert_eq!(
            reply.get(tags::RESET_SEQ_NUM_FLAG),
            (version == Version::Fix41).then_some("Y")
        );
    }
}

#[test]
fn logon_timeout_disconnects() {
    let mut h = Harness::new(version());
    h.now += 9 * SEC;
    assert_eq!(h.timer(), Outcome::Handled);
    h.now += SEC;
    assert_eq!(h.timer(), Outcome::Disconnect);
    assert!(h.out.is_empty());
}

// ---- 2: standard header -------------------------------------------------------------------

#[test]
fn t2a_in_sequence_application_message_is_delivered() {
    let mut h = Harness::logged_on();
    let order = h.msg("D", 2, &[(tags::CL_ORD_ID, "c1")]);
    assert_eq!(h.feed(&order), Outcome::Deliver);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 3);
}

#[test]
fn t2b_seq_too_high_asks_once_and_the_resend_fills_the_gap() {
    let mut h = Harness::logged_on();
    assert_eq!(h.feed(&h.msg("D", 5, &[])), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["2"]);
    // The gap only: 5 is queued.
    assert_eq!(out[0].num(tags::BEGIN_SEQ_NO), 2);
    assert_eq!(out[0].num(tags::END_SEQ_NO), 4);
    // Another message beyond the gap: no second request.
    assert_eq!(h.feed(&h.msg("D", 6, &[])), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 2);
    // The resend: 2 and 3 gap-filled, 4..6 resent.
    let orig = ts(NOW - SEC);
    let gap = h.msg(
        "4",
        2,
        &[
            (tags::POSS_DUP_FLAG, "Y"),
            (tags::GAP_FILL_FLAG, "Y"),
            (tags::NEW_SEQ_NO, "4"),
        ],
    );
    assert_eq!(h.feed(&gap), Outcome::Handled);
    for seq in 4..=6 {
        let m = h.msg(
            "D",
            seq,
            &[(tags::POSS_DUP_FLAG, "Y"), (tags::ORIG_SENDING_TIME, &orig)],
        );
        assert_eq!(h.feed(&m), Outcome::Deliver, "seq {seq}");
    }
    assert!(!h.s.resend_pending());
    assert!(h.out.is_empty());
    assert_eq!(h.feed(&h.msg("D", 7, &[])), Outcome::Deliver);
}

#[test]
fn t2c_seq_too_low_without_poss_dup_logs_out() {
    let mut h = Harness::logged_on();
    h.feed(&h.msg("0", 2, &[]));
    assert_eq!(h.feed(&h.msg("D", 2, &[])), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["5"]);
    assert_eq!(
        out[0].get(tags::TEXT),
        Some("MsgSeqNum too low, expecting 3 but received 2")
    );
}

#[test]
fn t2d_garbled_messages_are_ignored() {
    let mut h = Harness::logged_on();
    let mut bad = h.msg("D", 2, &[]);
    let n = bad.len();
    bad[n - 2] = if bad[n - 2] == b'0' { b'1' } else { b'0' }; // wrong CheckSum
    let garbled = next_frame(&bad, 1 << 20).unwrap_err();
    h.s.on_garbled(&bad[..garbled.skip], h.now).unwrap();
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 2);
    assert_eq!(h.s.garbled_count(), 1);
    assert_eq!(h.feed(&h.msg("D", 2, &[])), Outcome::Deliver);
}

#[test]
fn t2e_poss_dup_too_low_is_ignored() {
    let mut h = Harness::logged_on();
    h.feed(&h.msg("D", 2, &[]));
    let orig = ts(NOW - SEC);
    let dup = h.msg(
        "D",
        2,
        &[(tags::POSS_DUP_FLAG, "Y"), (tags::ORIG_SENDING_TIME, &orig)],
    );
    assert_eq!(h.feed(&dup), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 3);
}

#[test]
fn t2f_orig_sending_time_after_sending_time_is_rejected_and_logged_out() {
    let mut h = Harness::logged_on();
    let later = ts(NOW + SEC);
    let dup = h.msg(
        "D",
        2,
        &[
            (tags::POSS_DUP_FLAG, "Y"),
            (tags::ORIG_SENDING_TIME, &later),
        ],
    );
    assert_eq!(h.feed(&dup), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["3", "5"]);
    assert_eq!(out[0].num(tags::REF_SEQ_NUM), 2);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 10);
}

#[test]
fn t2g_poss_dup_without_orig_sending_time_is_rejected_and_consumed() {
    let mut h = Harness::logged_on();
    let dup = h.msg("D", 2, &[(tags::POSS_DUP_FLAG, "Y")]);
    assert_eq!(h.feed(&dup), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["3"]);
    assert_eq!(out[0].num(tags::REF_SEQ_NUM), 2);
    assert_eq!(out[0].num(tags::REF_TAG_ID), 122);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 1);
    assert_eq!(out[0].get(tags::REF_MSG_TYPE), Some("D"));
    assert_eq!(h.s.next_target_seq(), 3);
}

#[test]
fn t2i_wrong_begin_string_logs_out() {
    let mut h = Harness::logged_on();
    h.version = if h.version == Version::Fix42 {
        Version::Fix44
    } else {
        Version::Fix42
    };
    assert_eq!(h.feed(&h.msg("0", 2, &[])), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["5"]);
    assert!(out[0].get(tags::TEXT).unwrap().contains("BeginString"));
}

#[test]
fn t2k_wrong_comp_id_is_rejected_and_logged_out() {
    let mut h = Harness::logged_on();
    let t = ts(NOW);
    let m = raw(
        version().name(),
        "D",
        &[
            (tags::SENDER_COMP_ID, "TRADER1"),
            (tags::TARGET_COMP_ID, "ELSEWHERE"),
            (tags::MSG_SEQ_NUM, "2"),
            (tags::SENDING_TIME, &t),
        ],
    );
    assert_eq!(h.feed(&m), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["3", "5"]);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 9);
    assert_eq!(out[0].num(tags::REF_TAG_ID), 56);
    assert_eq!(out[0].num(tags::REF_SEQ_NUM), 2);
}

#[test]
fn t2o_sending_time_off_or_missing_is_rejected_and_logged_out() {
    let mut h = Harness::logged_on();
    h.now -= 121 * SEC; // their clock is two minutes behind ours
    let m = h.msg("D", 2, &[]);
    h.now = NOW;
    assert_eq!(h.feed(&m), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["3", "5"]);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 10);
    assert_eq!(out[0].num(tags::REF_TAG_ID), 52);

    let mut h = Harness::logged_on();
    let m = raw(
        version().name(),
        "D",
        &[
            (tags::SENDER_COMP_ID, "TRADER1"),
            (tags::TARGET_COMP_ID, "RIALTO"),
            (tags::MSG_SEQ_NUM, "2"),
        ],
    );
    assert_eq!(h.feed(&m), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["3", "5"]);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 10);
}

#[test]
fn t2o_a_sending_time_that_is_not_a_utc_timestamp_is_rejected_and_logged_out() {
    for bad in [
        "20261127-02:30:00.000+01:00",
        "yesterday",
        "20261127-25:00:00",
    ] {
        let mut h = Harness::logged_on();
        let m = raw(
            version().name(),
            "D",
            &[
                (tags::SENDER_COMP_ID, "TRADER1"),
                (tags::TARGET_COMP_ID, "RIALTO"),
                (tags::MSG_SEQ_NUM, "2"),
                (tags::SENDING_TIME, bad),
            ],
        );
        assert_eq!(h.feed(&m), Outcome::Disconnect, "{bad}");
        let out = h.take();
        assert_eq!(types(&out), ["3", "5"]);
        assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 10, "{bad}");
        assert_eq!(out[0].num(tags::REF_TAG_ID), 52);
        assert_eq!(out[0].num(tags::REF_SEQ_NUM), 2);
    }
}

#[test]
fn missing_msg_seq_num_logs_out() {
    let mut h = Harness::logged_on();
    let t = ts(NOW);
    let m = raw(
        version().name(),
        "D",
        &[
            (tags::SENDER_COMP_ID, "TRADER1"),
            (tags::TARGET_COMP_ID, "RIALTO"),
            (tags::SENDING_TIME, &t),
        ],
    );
    assert_eq!(h.feed(&m), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["5"]);
    assert_eq!(
        out[0].get(tags::TEXT),
        Some("MsgSeqNum (34) missing or invalid")
    );
}

#[test]
fn t2q_t2r_unknown_msg_type_is_delivered_for_the_application_to_reject() {
    let mut h = Harness::logged_on();
    let m = h.msg("ZZ", 2, &[]);
    assert_eq!(h.feed(&m), Outcome::Deliver);
    // The application knows no such type: session Reject, reason 11.
    h.s.reject(
        &Reject {
            ref_seq_num: 2,
            ref_tag: None,
            ref_msg_type: Some(b"ZZ"),
            reason: reject_reason::INVALID_MSG_TYPE,
            text: "Invalid MsgType",
        },
        h.now,
        &mut h.out,
    )
    .unwrap();
    // A valid type it does not support: BusinessMessageReject, reason 3.
    assert_eq!(h.feed(&h.msg("AE", 3, &[])), Outcome::Deliver);
    h.s.business_reject(
        &BusinessReject {
            ref_seq_num: 3,
            ref_msg_type: b"AE",
            ref_id: None,
            reason: business_reject_reason::UNSUPPORTED_MESSAGE_TYPE,
            text: "Unsupported Message Type",
        },
        h.now,
        &mut h.out,
    )
    .unwrap();
    let out = h.take();
    assert_eq!(types(&out), ["3", "j"]);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 11);
    assert_eq!(out[0].get(tags::REF_MSG_TYPE), Some("ZZ"));
    assert_eq!(out[0].num(tags::REF_SEQ_NUM), 2);
    assert_eq!(out[1].num(tags::BUSINESS_REJECT_REASON), 3);
    assert_eq!(out[1].get(tags::REF_MSG_TYPE), Some("AE"));
    assert_eq!((out[0].seq(), out[1].seq()), (2, 3));
    assert_eq!(h.s.next_target_seq(), 4);
}

// ---- 4, 5, 6: heartbeats and test requests ------------------------------------------------

#[test]
fn t4a_heartbeat_after_an_interval_without_sending() {
    let mut h = Harness::logged_on();
    h.now += 29 * SEC;
    h.feed(&h.msg("0", 2, &[])); // keep their side alive
    assert_eq!(h.timer(), Outcome::Handled);
    assert!(h.out.is_empty());
    h.now = NOW + 30 * SEC;
    assert_eq!(h.timer(), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["0"]);
    assert_eq!(out[0].seq(), 2);
    assert_eq!(out[0].get(tags::TEST_REQ_ID), None);
}

#[test]
fn t4b_test_request_is_answered_with_its_id() {
    let mut h = Harness::logged_on();
    let m = h.msg("1", 2, &[(tags::TEST_REQ_ID, "ping-7")]);
    assert_eq!(h.feed(&m), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["0"]);
    assert_eq!(out[0].get(tags::TEST_REQ_ID), Some("ping-7"));
    assert_eq!(h.s.next_target_seq(), 3);
}

#[test]
fn t5_heartbeat_is_accepted() {
    let mut h = Harness::logged_on();
    assert_eq!(h.feed(&h.msg("0", 2, &[])), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 3);
}

#[test]
fn t6_test_request_after_silence_then_disconnect() {
    let mut h = Harness::logged_on();
    h.now = NOW + 35 * SEC; // 30 s + 20 % = 36 s
    h.timer();
    assert_eq!(types(&h.take()), ["0"]);
    h.now = NOW + 36 * SEC;
    assert_eq!(h.timer(), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["1"]);
    let id = out[0].get(tags::TEST_REQ_ID).unwrap().to_string();
    // The next Heartbeat is due 30 s after the TestRequest went out.
    assert_eq!(h.s.next_deadline_ns(), Some(NOW + 66 * SEC));

    // Answered (at +36 s): the session lives on.
    let reply = h.msg("0", 2, &[(tags::TEST_REQ_ID, &id)]);
    assert_eq!(h.feed(&reply), Outcome::Handled);
    h.now = NOW + 71 * SEC;
    assert_eq!(h.timer(), Outcome::Handled);
    assert_eq!(types(&h.take()), ["0"]);

    // Silence again: TestRequest, then after another interval, disconnect.
    h.now = NOW + 72 * SEC;
    h.timer();
    assert_eq!(types(&h.take()), ["1"]);
    h.now += 35 * SEC;
    assert_eq!(h.timer(), Outcome::Handled);
    h.take();
    h.now += SEC;
    assert_eq!(h.timer(), Outcome::Disconnect);
    assert_eq!(h.s.disconnect_reason(), Some("TestRequest unanswered"));
}

// ---- 7: Reject ----------------------------------------------------------------------------

#[test]
fn t7_reject_is_accepted_and_consumed() {
    let mut h = Harness::logged_on();
    let m = h.msg(
        "3",
        2,
        &[
            (tags::REF_SEQ_NUM, "1"),
            (tags::SESSION_REJECT_REASON, "99"),
        ],
    );
    assert_eq!(h.feed(&m), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 3);
}

// ---- 8: ResendRequest ---------------------------------------------------------------------

#[test]
fn t8_resend_request_resends_app_messages_and_gap_fills_admin_ones() {
    let mut h = Harness::logged_on(); // our Logon was 1
    let first_time = h.now;
    assert_eq!(h.send_order_ack("c2"), 2);
    assert_eq!(h.send_order_ack("c3"), 3);
    h.now += 30 * SEC;
    h.timer(); // Heartbeat 4
    h.feed(&h.msg("1", 2, &[(tags::TEST_REQ_ID, "x")])); // Heartbeat 5
    assert_eq!(h.send_order_ack("c6"), 6);
    h.now += 30 * SEC;
    h.timer(); // Heartbeat 7 (their TestRequest 30 s ago keeps them alive)
    h.take();
    h.now += SEC;

    let rr = h.msg(
        "2",
        3,
        &[(tags::BEGIN_SEQ_NO, "1"), (tags::END_SEQ_NO, "0")],
    );
    assert_eq!(h.feed(&rr), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["4", "8", "8", "4", "8", "4"]);
    let seqs: Vec<u64> = out.iter().map(Msg::seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 6, 7]);
    for m in &out {
        assert_eq!(m.get(tags::POSS_DUP_FLAG), Some("Y"));
        assert_eq!(m.get(tags::SENDING_TIME), Some(ts(h.now).as_str()));
    }
    assert_eq!(out[0].get(tags::GAP_FILL_FLAG), Some("Y"));
    assert_eq!(out[0].num(tags::NEW_SEQ_NO), 2);
    assert_eq!(out[1].get(tags::CL_ORD_ID), Some("c2"));
    assert_eq!(
        out[1].get(tags::ORIG_SENDING_TIME),
        Some(ts(first_time).as_str())
    );
    assert_eq!(out[3].num(tags::NEW_SEQ_NO), 6);
    assert_eq!(out[4].get(tags::CL_ORD_ID), Some("c6"));
    assert_eq!(out[5].num(tags::NEW_SEQ_NO), 8);
    // A resend uses no new numbers.
    assert_eq!(h.s.next_sender_seq(), 8);

    // A bounded range, and the FIX 4.2 "infinity" 999999.
    let rr = h.msg(
        "2",
        4,
        &[(tags::BEGIN_SEQ_NO, "3"), (tags::END_SEQ_NO, "3")],
    );
    h.feed(&rr);
    let out = h.take();
    assert_eq!(types(&out), ["8"]);
    assert_eq!(out[0].get(tags::CL_ORD_ID), Some("c3"));
    let rr = h.msg(
        "2",
        5,
        &[(tags::BEGIN_SEQ_NO, "6"), (tags::END_SEQ_NO, "999999")],
    );
    h.feed(&rr);
    assert_eq!(types(&h.take()), ["8", "4"]);
}

#[test]
fn t8_a_bad_resend_request_is_rejected() {
    let mut h = Harness::logged_on();
    let rr = h.msg("2", 2, &[(tags::BEGIN_SEQ_NO, "1")]);
    h.feed(&rr);
    let out = h.take();
    assert_eq!(types(&out), ["3"]);
    assert_eq!(out[0].num(tags::REF_TAG_ID), 16);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 1);
    let rr = h.msg(
        "2",
        3,
        &[(tags::BEGIN_SEQ_NO, "5"), (tags::END_SEQ_NO, "2")],
    );
    h.feed(&rr);
    assert_eq!(h.take()[0].num(tags::SESSION_REJECT_REASON), 5);
    assert_eq!(h.s.next_target_seq(), 4);
}

// ---- 10: SequenceReset-GapFill ------------------------------------------------------------

fn gap_fill(h: &Harness, seq: u64, new_seq: &str, poss_dup: bool) -> Vec<u8> {
    // PossDupFlag belongs to the header: before the body.
    let mut f = Vec::new();
    if poss_dup {
        f.push((tags::POSS_DUP_FLAG, "Y"));
    }
    f.extend([(tags::GAP_FILL_FLAG, "Y"), (tags::NEW_SEQ_NO, new_seq)]);
    h.msg("4", seq, &f)
}

#[test]
fn t10_gap_fill() {
    // a: too high → ResendRequest.
    let mut h = Harness::logged_on();
    assert_eq!(h.feed(&gap_fill(&h, 5, "8", false)), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["2"]);
    assert_eq!(out[0].num(tags::BEGIN_SEQ_NO), 2);
    // b: in sequence → next expected = NewSeqNo.
    assert_eq!(h.feed(&gap_fill(&h, 2, "8", true)), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 8);
    // c: too low with PossDupFlag → ignored.
    assert_eq!(h.feed(&gap_fill(&h, 3, "6", true)), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 8);
    // e: NewSeqNo not above MsgSeqNum → Reject 5 on tag 36.
    assert_eq!(h.feed(&gap_fill(&h, 8, "8", false)), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["3"]);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 5);
    assert_eq!(out[0].num(tags::REF_TAG_ID), 36);
    assert_eq!(out[0].num(tags::REF_SEQ_NUM), 8);
    // d: too low without PossDupFlag → Logout.
    assert_eq!(h.feed(&gap_fill(&h, 3, "6", false)), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["5"]);
    assert_eq!(
        out[0].get(tags::TEXT),
        Some("MsgSeqNum too low, expecting 9 but received 3")
    );
}

// ---- 11: SequenceReset-Reset --------------------------------------------------------------

#[test]
fn t11_sequence_reset() {
    let mut h = Harness::logged_on();
    // a: higher NewSeqNo, whatever MsgSeqNum says.
    let m = h.msg("4", 99, &[(tags::NEW_SEQ_NO, "10")]);
    assert_eq!(h.feed(&m), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 10);
    // b: equal: accepted, no change.
    let m = h.msg(
        "4",
        1,
        &[(tags::NEW_SEQ_NO, "10"), (tags::GAP_FILL_FLAG, "N")],
    );
    assert_eq!(h.feed(&m), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 10);
    // c: lower: Reject 5 on tag 36.
    let m = h.msg("4", 10, &[(tags::NEW_SEQ_NO, "4")]);
    assert_eq!(h.feed(&m), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["3"]);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 5);
    assert_eq!(out[0].num(tags::REF_TAG_ID), 36);
    assert_eq!(h.s.next_target_seq(), 10);
}

// ---- 12, 13: Logout -----------------------------------------------------------------------

#[test]
fn t12_t13a_our_logout_waits_for_theirs() {
    let mut h = Harness::logged_on();
    assert_eq!(
        h.s.logout("shutting down", h.now, &mut h.out).unwrap(),
        Outcome::Handled
    );
    let out = h.take();
    assert_eq!(types(&out), ["5"]);
    assert_eq!(out[0].get(tags::TEXT), Some("shutting down"));
    assert!(!h.s.is_logged_on());
    // Application messages wait in the store now.
    h.send_order_ack("late");
    assert!(h.out.is_empty());
    assert_eq!(h.feed(&h.msg("5", 2, &[])), Outcome::Disconnect);
    assert!(h.out.is_empty());
    assert_eq!(h.s.disconnect_reason(), Some("Logout confirmed"));

    let mut h = Harness::logged_on();
    h.s.logout("bye", h.now, &mut h.out).unwrap();
    h.take();
    // Session-level answers still go out while we wait.
    h.feed(&h.msg("1", 2, &[(tags::TEST_REQ_ID, "t")]));
    h.feed(&h.msg("1", 3, &[]));
    let out = h.take();
    assert_eq!(types(&out), ["0", "3"]);
    assert_eq!(out[1].num(tags::REF_TAG_ID), 112);
    h.now += 10 * SEC;
    assert_eq!(h.timer(), Outcome::Disconnect);
    assert!(h.out.is_empty());
}

/// 13b: an unsolicited Logout is answered with a Logout; then the session waits up to 10 s
/// for the counterparty to disconnect, ignoring whatever comes meanwhile, and disconnects.
#[test]
fn t13b_their_logout_is_answered_then_we_wait_for_them_to_disconnect() {
    let mut h = Harness::logged_on();
    assert_eq!(h.feed(&h.msg("5", 2, &[])), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["5"]);
    assert_eq!(out[0].seq(), 2);
    assert_eq!(h.s.next_target_seq(), 3);
    assert!(!h.s.is_logged_on());
    assert!(h.s.is_connected());
    assert_eq!(h.s.next_deadline_ns(), Some(h.now + 10 * SEC));

    // Meanwhile: nothing is processed, nothing answered, no number used.
    h.now += 3 * SEC;
    assert_eq!(h.feed(&h.msg("D", 3, &[])), Outcome::Handled);
    assert_eq!(
        h.feed(&h.msg("1", 4, &[(tags::TEST_REQ_ID, "T")])),
        Outcome::Handled
    );
    assert_eq!(h.feed(&h.msg("5", 5, &[])), Outcome::Handled);
    assert_eq!(h.timer(), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 3);
    // What the application sends is stored for a later resend, not written.
    let seq =
        h.s.send_app(
            b"8",
            h.now,
            |w| {
                w.str(tags::CL_ORD_ID, b"x");
            },
            &mut h.out,
        )
        .unwrap();
    assert_eq!(seq, 3);
    assert!(h.out.is_empty());

    // They do not disconnect: we do, 10 s after our Logout.
    h.now += 7 * SEC - 1;
    assert_eq!(h.timer(), Outcome::Handled);
    h.now += 1;
    assert_eq!(h.timer(), Outcome::Disconnect);
    assert!(h.out.is_empty());
    assert!(!h.s.is_connected());

    // They disconnect first: the session is simply disconnected.
    let mut h = Harness::logged_on();
    assert_eq!(h.feed(&h.msg("5", 2, &[])), Outcome::Handled);
    h.take();
    h.s.on_disconnect(h.now).unwrap();
    assert!(!h.s.is_connected());
    assert_eq!(h.timer(), Outcome::Handled);
}

// ---- 14: field errors ---------------------------------------------------------------------

/// A message of theirs with `tail` (raw `tag=value|` text) after the standard header.
fn with_raw_tail(h: &Harness, msg_type: &str, seq: u64, tail: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = MessageWriter::begin(&mut out, h.version.begin_string(), msg_type.as_bytes());
    w.str(tags::SENDER_COMP_ID, b"TRADER1")
        .str(tags::TARGET_COMP_ID, b"RIALTO")
        .uint(tags::MSG_SEQ_NUM, seq)
        .timestamp(tags::SENDING_TIME, h.now)
        .raw(tail.replace('|', "\u{1}").as_bytes());
    w.finish();
    out
}

#[test]
fn t14_field_errors_are_rejected_and_consumed() {
    let mut h = Harness::logged_on();
    let cases = [
        ("x1=5|", reject_reason::INVALID_TAG_NUMBER, None),
        ("0=5|", reject_reason::INVALID_TAG_NUMBER, None),
        ("58=|", reject_reason::TAG_WITHOUT_VALUE, Some(58)),
        (
            "49=TRADER1|",
            reject_reason::TAG_APPEARS_MORE_THAN_ONCE,
            Some(49),
        ),
        ("43=maybe|", reject_reason::INCORRECT_DATA_FORMAT, Some(43)),
    ];
    let mut seq = 2;
    for (tail, reason, tag) in cases {
        let m = with_raw_tail(&h, "D", seq, tail);
        assert_eq!(h.feed(&m), Outcome::Handled, "{tail}");
        let out = h.take();
        assert_eq!(types(&out), ["3"], "{tail}");
        assert_eq!(
            out[0].num(tags::SESSION_REJECT_REASON),
            u64::from(reason),
            "{tail}"
        );
        assert_eq!(
            out[0].get(tags::REF_TAG_ID).map(|t| t.parse().unwrap()),
            tag
        );
        assert_eq!(out[0].num(tags::REF_SEQ_NUM), seq);
        seq += 1;
        assert_eq!(h.s.next_target_seq(), seq);
    }
    // A TestRequest without its TestReqID: required tag missing.
    h.feed(&h.msg("1", seq, &[]));
    let out = h.take();
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 1);
    assert_eq!(out[0].num(tags::REF_TAG_ID), 112);
}

/// 14k: a non-data field whose value holds an SOH: Reject 17 with the field as RefTagID, the
/// number used, and the session goes on.
#[test]
fn t14k_a_non_data_value_holding_soh_is_rejected_with_reason_17() {
    let mut h = Harness::logged_on();
    let mut seq = 2;
    for (tail, tag) in [
        ("58=ab|cd|", 58),
        ("55=X|58=ab|cd|ef|", 58),
        ("11=A1|more text|54=1|", 11),
    ] {
        let m = with_raw_tail(&h, "D", seq, tail);
        assert_eq!(h.feed(&m), Outcome::Handled, "{tail}");
        let out = h.take();
        assert_eq!(types(&out), ["3"], "{tail}");
        assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 17, "{tail}");
        assert_eq!(out[0].num(tags::REF_TAG_ID), tag, "{tail}");
        assert_eq!(out[0].num(tags::REF_SEQ_NUM), seq);
        seq += 1;
        assert_eq!(h.s.next_target_seq(), seq, "the number is used");
    }
    // The session goes on.
    assert_eq!(h.feed(&h.msg("D", seq, &[])), Outcome::Deliver);
}

// ---- 16: queueing while disconnected ----------------------------------------------------

#[test]
fn t16_messages_sent_while_disconnected_come_by_resend_after_logon() {
    let mut h = Harness::logged_on();
    h.s.on_disconnect(h.now).unwrap();
    assert_eq!(h.send_order_ack("queued1"), 2);
    assert_eq!(h.send_order_ack("queued2"), 3);
    assert!(h.out.is_empty());

    h.s.on_connect(h.now);
    assert_eq!(h.feed(&h.logon(2, &[])), Outcome::LoggedOn);
    let out = h.take();
    assert_eq!(types(&out), ["A"]);
    assert_eq!(out[0].seq(), 4); // they expect 2: they ask for the gap
    let rr = h.msg(
        "2",
        3,
        &[(tags::BEGIN_SEQ_NO, "2"), (tags::END_SEQ_NO, "0")],
    );
    h.feed(&rr);
    let out = h.take();
    assert_eq!(types(&out), ["8", "8", "4"]);
    assert_eq!(out[0].get(tags::CL_ORD_ID), Some("queued1"));
    assert_eq!(out[1].get(tags::CL_ORD_ID), Some("queued2"));
    assert_eq!(out[2].num(tags::NEW_SEQ_NO), 5);
}

#[test]
fn reset_on_disconnect_starts_over() {
    let mut h = Harness::logged_on();
    h.s.on_disconnect(h.now).unwrap();
    assert_eq!((h.s.next_sender_seq(), h.s.next_target_seq()), (2, 2));
    let mut config = SessionConfig::new(version(), "RIALTO", "TRADER1");
    config.reset_on_disconnect = true;
    let mut s = Session::new(config, MemoryStore::new());
    s.on_connect(NOW);
    let logon = h.logon(1, &[]);
    let (frame, _) = next_frame(&logon, 4096).unwrap().unwrap();
    let mut out = Vec::new();
    s.on_message(&frame, NOW, &mut |_| Ok(()), &mut out)
        .unwrap();
    s.on_disconnect(NOW).unwrap();
    assert_eq!((s.next_sender_seq(), s.next_target_seq()), (1, 1));
}

// ---- 20: simultaneous ResendRequests ------------------------------------------------------

#[test]
fn t20_their_resend_request_is_served_before_ours_is_sent() {
    let mut h = Harness::logged_on();
    h.send_order_ack("c2");
    h.take();
    // Their ResendRequest arrives with a number beyond a gap.
    let rr = h.msg(
        "2",
        4,
        &[(tags::BEGIN_SEQ_NO, "2"), (tags::END_SEQ_NO, "0")],
    );
    assert_eq!(h.feed(&rr), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["8", "2"]);
    assert_eq!(out[0].get(tags::POSS_DUP_FLAG), Some("Y"));
    assert_eq!(out[1].num(tags::BEGIN_SEQ_NO), 2);
}

/// Case 20 as the test cases put it: their ResendRequest comes while ours awaits its answer.
/// It is served at once, and once our range has come, what is still missing (from the
/// ResendRequest's own number on) is asked for.
#[test]
fn t20_a_resend_request_while_ours_is_pending_is_served_and_the_gap_asked_for_again() {
    let mut h = Harness::logged_on();
    h.send_order_ack("c2");
    h.take();
    // 2 and 3 are lost: 4 is queued and we ask for 2..=3.
    assert_eq!(h.feed(&h.msg("D", 4, &[])), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["2"]);
    assert_eq!(
        (out[0].num(tags::BEGIN_SEQ_NO), out[0].num(tags::END_SEQ_NO)),
        (2, 3)
    );
    // Their ResendRequest (5) while ours is pending: served, no second request yet.
    let rr = h.msg(
        "2",
        5,
        &[(tags::BEGIN_SEQ_NO, "2"), (tags::END_SEQ_NO, "0")],
    );
    assert_eq!(h.feed(&rr), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["8", "4"]);
    assert_eq!(out[0].get(tags::CL_ORD_ID), Some("c2"));
    assert_eq!(out[0].get(tags::POSS_DUP_FLAG), Some("Y"));
    assert_eq!(out[1].num(tags::NEW_SEQ_NO), 4);
    assert!(h.s.resend_pending());
    // Our range comes; 4 comes from the queue; 5 (their ResendRequest) is still missing here.
    let orig = ts(NOW - SEC);
    let resent = [
        (tags::POSS_DUP_FLAG, "Y"),
        (tags::ORIG_SENDING_TIME, orig.as_str()),
    ];
    assert_eq!(h.feed(&h.msg("D", 2, &resent)), Outcome::Deliver);
    assert_eq!(h.feed(&h.msg("D", 3, &resent)), Outcome::Deliver);
    assert_eq!(h.drain_queue(), [(4, Outcome::Deliver)]);
    let out = h.take();
    assert_eq!(types(&out), ["2"]);
    assert_eq!(
        (out[0].num(tags::BEGIN_SEQ_NO), out[0].num(tags::END_SEQ_NO)),
        (5, 0)
    );
    // Their ResendRequest comes back gap-filled: the session is in sequence again.
    assert_eq!(h.feed(&gap_fill(&h, 5, "6", true)), Outcome::Handled);
    assert!(!h.s.resend_pending());
    assert_eq!(h.s.next_target_seq(), 6);
    assert!(h.out.is_empty());
}

// ---- 15: fields in another order ----------------------------------------------------------

/// Header fields in another order, and a session message's body fields in another order, are
/// accepted, and the messages after them too.
#[test]
fn t15_header_and_body_fields_in_another_order_are_accepted() {
    let mut h = Harness::logged_on();
    let t = ts(h.now);
    let order = raw(
        version().name(),
        "D",
        &[
            (tags::SENDING_TIME, &t),
            (tags::MSG_SEQ_NUM, "2"),
            (tags::TARGET_COMP_ID, "RIALTO"),
            (tags::SENDER_COMP_ID, "TRADER1"),
            (tags::CL_ORD_ID, "c1"),
        ],
    );
    assert_eq!(h.feed(&order), Outcome::Deliver);
    h.send_order_ack("c1");
    h.take();
    let rr = raw(
        version().name(),
        "2",
        &[
            (tags::MSG_SEQ_NUM, "3"),
            (tags::TARGET_COMP_ID, "RIALTO"),
            (tags::SENDING_TIME, &t),
            (tags::SENDER_COMP_ID, "TRADER1"),
            (tags::END_SEQ_NO, "0"),
            (tags::BEGIN_SEQ_NO, "2"),
        ],
    );
    assert_eq!(h.feed(&rr), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["8"]);
    assert_eq!(out[0].get(tags::CL_ORD_ID), Some("c1"));
    assert_eq!(h.feed(&h.msg("0", 4, &[])), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 5);
}

// ---- the file store and the message log ---------------------------------------------------

#[test]
fn file_store_survives_reopen_and_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let config = SessionConfig::new(version(), "RIALTO", "TRADER1");
    let name = config.session_name();
    assert_eq!(name, format!("{}-RIALTO-TRADER1", version().name()));
    let h = Harness::new(version());
    {
        let store = FileStore::open(dir.path(), &name).unwrap();
        let mut s = Session::new(config.clone(), store);
        s.on_connect(NOW);
        let mut out = Vec::new();
        let logon = h.logon(1, &[]);
        let (frame, _) = next_frame(&logon, 4096).unwrap().unwrap();
        s.on_message(&frame, NOW, &mut |_| Ok(()), &mut out)
            .unwrap();
        for id in ["a", "b", "c"] {
            s.send_app(
                b"8",
                NOW,
                |w| {
                    w.str(tags::CL_ORD_ID, id.as_bytes());
                },
                &mut out,
            )
            .unwrap();
        }
    }
    // Reopened: numbers and resend content are back.
    let mut store = FileStore::open(dir.path(), &name).unwrap();
    assert_eq!((store.next_sender_seq(), store.next_target_seq()), (5, 2));
    assert_eq!(store.stored_messages(), 3);
    let mut buf = Vec::new();
    assert_eq!(store.read_next(1, 10, &mut buf).unwrap().unwrap().0, 2);
    let (frame, _) = next_frame(&buf, 4096).unwrap().unwrap();
    assert_eq!(frame.get(tags::CL_ORD_ID), Some(&b"a"[..]));
    drop(store);

    // Tear the last record: it is dropped, the others stay, appending goes on.
    let path = dir.path().join(format!("{name}.messages"));
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let mut store = FileStore::open(dir.path(), &name).unwrap();
    assert_eq!(store.stored_messages(), 2);
    // The sequence number file still says 5: message 4 is gone but its number is used.
    assert_eq!(store.next_sender_seq(), 5);
    store.store(5, NOW, b"8=FIX.4.4\x01").unwrap();
    store.flush().unwrap();
    drop(store);
    let mut store = FileStore::open(dir.path(), &name).unwrap();
    assert_eq!(store.stored_messages(), 3);
    assert_eq!(store.read_next(4, 10, &mut buf).unwrap().unwrap().0, 5);
    assert_eq!(store.read_next(6, 10, &mut buf).unwrap(), None);

    // A reset empties it.
    store.reset().unwrap();
    drop(store);
    let store = FileStore::open(dir.path(), &name).unwrap();
    assert_eq!(store.stored_messages(), 0);
    assert_eq!((store.next_sender_seq(), store.next_target_seq()), (1, 1));
}

#[test]
fn a_session_on_a_reopened_file_store_resends_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let config = SessionConfig::new(version(), "RIALTO", "TRADER1");
    let h = Harness::new(version());
    let mut out = Vec::new();
    {
        let mut s = Session::new(config.clone(), FileStore::open(dir.path(), "s").unwrap());
        s.on_connect(NOW);
        let logon = h.logon(1, &[]);
        let (frame, _) = next_frame(&logon, 4096).unwrap().unwrap();
        s.on_message(&frame, NOW, &mut |_| Ok(()), &mut out)
            .unwrap();
        s.send_app(
            b"8",
            NOW,
            |w| {
                w.str(tags::CL_ORD_ID, b"x");
            },
            &mut out,
        )
        .unwrap();
    }
    let mut s = Session::new(config, FileStore::open(dir.path(), "s").unwrap());
    assert_eq!((s.next_sender_seq(), s.next_target_seq()), (3, 2));
    s.on_connect(NOW);
    out.clear();
    let logon = h.logon(2, &[]);
    let (frame, _) = next_frame(&logon, 4096).unwrap().unwrap();
    assert_eq!(
        s.on_message(&frame, NOW, &mut |_| Ok(()), &mut out)
            .unwrap(),
        Outcome::LoggedOn
    );
    let rr = h.msg(
        "2",
        3,
        &[(tags::BEGIN_SEQ_NO, "1"), (tags::END_SEQ_NO, "0")],
    );
    let (frame, _) = next_frame(&rr, 4096).unwrap().unwrap();
    out.clear();
    s.on_message(&frame, NOW, &mut |_| Ok(()), &mut out)
        .unwrap();
    let out = parse_out(&out);
    assert_eq!(types(&out), ["4", "8", "4"]);
    assert_eq!(out[1].get(tags::CL_ORD_ID), Some("x"));
}

#[test]
fn the_log_holds_every_message_and_answers_queries() {
    let dir = tempfile::tempdir().unwrap();
    let config = SessionConfig::new(version(), "RIALTO", "TRADER1");
    let name = config.session_name();
    let mut h = Harness::new(version());
    h.s = Session::new(config, MemoryStore::new())
        .with_log(MessageLog::open(dir.path(), &name).unwrap());
    h.s.on_connect(NOW);
    h.feed(&h.logon(1, &[])); // in 1, out 1
    h.now += SEC;
    h.feed(&h.msg("D", 2, &[(tags::CL_ORD_ID, "ord-1")])); // in 2
    h.send_order_ack("ord-1"); // out 2
    h.now += SEC;
    h.feed(&h.msg(
        "F",
        3,
        &[(tags::CL_ORD_ID, "cxl-1"), (tags::ORIG_CL_ORD_ID, "ord-1")],
    ));
    h.now += SEC;
    h.feed(&h.msg("D", 4, &[(tags::CL_ORD_ID, "ord-2")]));
    h.s.on_garbled(b"8=FIX.4.4\x019=5\x01junk", h.now).unwrap();

    let all: Vec<_> = log::query(dir.path(), &name, LogFilter::default())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let dirs: Vec<&str> = all.iter().map(|r| r.direction.name()).collect();
    assert_eq!(dirs, ["in", "out", "in", "out", "in", "in", "in-garbled"]);
    assert_eq!(all[0].time_ns, NOW);

    let by_id = |id: &str, from: Option<i64>, to: Option<i64>| -> Vec<(i64, String)> {
        let filter = LogFilter {
            clordid: Some(id.to_string()),
            from_ns: from,
            to_ns: to,
        };
        log::query(dir.path(), &name, filter)
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                let (frame, _) = next_frame(&r.bytes, 4096).unwrap().unwrap();
                (
                    r.time_ns,
                    String::from_utf8(frame.msg_type.to_vec()).unwrap(),
                )
            })
            .collect()
    };
    let ord1 = by_id("ord-1", None, None);
    assert_eq!(
        ord1,
        [
            (NOW + SEC, "D".to_string()),
            (NOW + SEC, "8".to_string()),
            (NOW + 2 * SEC, "F".to_string())
        ]
    );
    assert_eq!(by_id("ord-1", Some(NOW + 2 * SEC), None).len(), 1);
    assert_eq!(by_id("ord-1", None, Some(NOW + SEC)).len(), 2);
    assert!(by_id("nope", None, None).is_empty());

    // A torn tail: readers stop before it, a reopened log cuts it and appends after.
    drop(h);
    let path = log::log_path(dir.path(), &name).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 3).unwrap();
    drop(f);
    assert_eq!(
        log::query(dir.path(), &name, LogFilter::default())
            .unwrap()
            .count(),
        6
    );
    let mut log = MessageLog::open(dir.path(), &name).unwrap();
    log.append(rialto_fix::session::Direction::Out, NOW + 9 * SEC, b"8=x");
    log.flush().unwrap();
    let all: Vec<_> = log::query(dir.path(), &name, LogFilter::default())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(all.len(), 7);
    assert_eq!(all[6].bytes, b"8=x");
}

/// The tests above again, in every version.
mod every_version {
    use super::*;

    macro_rules! in_every_version {
        ($($test:ident),* $(,)?) => {$(
            #[test]
            fn $test() {
                for version in Version::ALL {
                    VERSION.with(|v| v.set(version));
                    super::$test();
                }
            }
        )*};
    }

    in_every_version!(
        t1s_a_valid_logon_is_answered_with_logon,
        t1s_a_logon_with_seq_too_high_is_accepted_then_a_resend_is_requested,
        t1s_c_logon_with_wrong_comp_ids_is_closed_without_a_message,
        t1s_c_refused_logon_is_closed_without_a_message,
        t2s_first_message_not_logon_disconnects_without_reply,
        t2c_logon_with_seq_too_low_is_logged_out,
        logon_timeout_disconnects,
        t2a_in_sequence_application_message_is_delivered,
        t2b_seq_too_high_asks_once_and_the_resend_fills_the_gap,
        t2c_seq_too_low_without_poss_dup_logs_out,
        t2d_garbled_messages_are_ignored,
        t2e_poss_dup_too_low_is_ignored,
        t2i_wrong_begin_string_logs_out,
        t4a_heartbeat_after_an_interval_without_sending,
        t4b_test_request_is_answered_with_its_id,
        t5_heartbeat_is_accepted,
        t6_test_request_after_silence_then_disconnect,
        t7_reject_is_accepted_and_consumed,
        t13b_their_logout_is_answered_then_we_wait_for_them_to_disconnect,
        t16_messages_sent_while_disconnected_come_by_resend_after_logon,
        reset_on_disconnect_starts_over,
        t20_their_resend_request_is_served_before_ours_is_sent,
        t20_a_resend_request_while_ours_is_pending_is_served_and_the_gap_asked_for_again,
        t15_header_and_body_fields_in_another_order_are_accepted,
        a_session_on_a_reopened_file_store_resends_from_disk,
        the_log_holds_every_message_and_answers_queries,
        t2b_messages_above_a_gap_are_queued_and_processed_in_order_once_it_is_filled,
        t2b_the_queue_is_bounded_and_what_it_drops_is_asked_for_again,
        t10a_a_gap_fill_above_the_gap_is_queued_and_applied_in_turn,
        t6_each_session_makes_its_own_test_req_ids,
        t2m_t2t_t3b_t3e_bad_body_length_field_order_or_checksum_are_garbled_and_ignored,
        t17b_an_unsupported_encrypt_method_gets_reject_7_then_a_logout,
    );

    /// Those that check a Reject's SessionRejectReason (373) or RefTagID (371): FIX 4.2 on.
    macro_rules! from_fix42 {
        ($($test:ident),* $(,)?) => {$(
            #[test]
            fn $test() {
                for version in Version::ALL.into_iter().filter(|v| *v >= Version::Fix42) {
                    VERSION.with(|v| v.set(version));
                    super::$test();
                }
            }
        )*};
    }

    from_fix42!(
        logon_with_reset_seq_num_flag_resets_both_sides,
        missing_msg_seq_num_logs_out,
        file_store_survives_reopen_and_a_torn_tail,
        t10_gap_fill,
        t11_sequence_reset,
        t12_t13a_our_logout_waits_for_theirs,
        t14_field_errors_are_rejected_and_consumed,
        t14k_a_non_data_value_holding_soh_is_rejected_with_reason_17,
        t1s_d_logon_without_or_with_a_bad_heart_bt_int_is_logged_out,
        t2q_t2r_unknown_msg_type_is_delivered_for_the_application_to_reject,
        t2f_orig_sending_time_after_sending_time_is_rejected_and_logged_out,
        t2g_poss_dup_without_orig_sending_time_is_rejected_and_consumed,
        t2k_wrong_comp_id_is_rejected_and_logged_out,
        t2o_sending_time_off_or_missing_is_rejected_and_logged_out,
        t2o_a_sending_time_that_is_not_a_utc_timestamp_is_rejected_and_logged_out,
        t8_a_bad_resend_request_is_rejected,
        t8_resend_request_resends_app_messages_and_gap_fills_admin_ones,
        t11_a_reset_is_processed_whatever_its_msg_seq_num_and_the_session_goes_on,
        t14_session_messages_are_checked_against_the_dictionary,
        t14_user_defined_tags_pass_when_allowed,
        t2k_a_missing_or_empty_comp_id_is_rejected_and_the_session_goes_on,
        t18a_third_party_addressed_messages_are_accepted_and_answers_reverse_the_routing,
    );
}

/// FIX 4.0 and 4.1 Rejects have RefSeqNum and Text only, and those versions have no
/// BusinessMessageReject: a business reject is a Reject whose Text says what was wrong.
#[test]
fn fix_40_and_41_rejects_carry_their_reason_in_text() {
    for version in [Version::Fix40, Version::Fix41] {
        VERSION.with(|v| v.set(version));
        let mut h = Harness::logged_on();
        let reject = Reject {
            ref_seq_num: 2,
            ref_tag: Some(38),
            ref_msg_type: Some(b"D"),
            reason: reject_reason::INCORRECT_DATA_FORMAT,
            text: "",
        };
        h.s.reject(&reject, h.now, &mut h.out).unwrap();
        let business = BusinessReject {
            ref_seq_num: 3,
            ref_msg_type: b"E",
            ref_id: None,
            reason: business_reject_reason::UNSUPPORTED_MESSAGE_TYPE,
            text: "unsupported message type",
        };
        h.s.business_reject(&business, h.now, &mut h.out).unwrap();
        let out = h.take();
        assert_eq!(types(&out), ["3", "3"]);
        for m in &out {
            let tags: Vec<u32> = m.fields.iter().map(|(t, _)| *t).collect();
            assert_eq!(tags, [49, 56, 34, 52, 45, 58], "{version:?} {m:?}");
        }
        assert_eq!(
            out[0].get(tags::TEXT),
            Some("Incorrect data format for value, field=38")
        );
        assert_eq!(out[1].get(tags::TEXT), Some("unsupported message type"));
    }
}

// ---- Issue 29: queueing above a gap, Reset, admin validation, routing, wording -----------

#[test]
fn t2b_messages_above_a_gap_are_queued_and_processed_in_order_once_it_is_filled() {
    let mut h = Harness::logged_on();
    // 2 and 3 are lost; 4 and 5 arrive: one ResendRequest for the gap, both kept.
    assert_eq!(
        h.feed(&h.msg("D", 4, &[(tags::CL_ORD_ID, "c4")])),
        Outcome::Handled
    );
    let out = h.take();
    assert_eq!(types(&out), ["2"]);
    // Just the gap: 4 is held, so it is not asked for again.
    assert_eq!(
        (out[0].num(tags::BEGIN_SEQ_NO), out[0].num(tags::END_SEQ_NO)),
        (2, 3)
    );
    assert_eq!(
        h.feed(&h.msg("D", 5, &[(tags::CL_ORD_ID, "c5")])),
        Outcome::Handled
    );
    assert!(h.out.is_empty());
    assert_eq!(h.s.queued_count(), 2);
    assert!(h.drain_queue().is_empty(), "the gap is still open");

    // The resend: 2 resent, 3 gap-filled; then the queued 4 and 5, in order.
    let orig = ts(NOW - SEC);
    let resent = [
        (tags::POSS_DUP_FLAG, "Y"),
        (tags::ORIG_SENDING_TIME, orig.as_str()),
    ];
    assert_eq!(h.feed(&h.msg("D", 2, &resent)), Outcome::Deliver);
    assert!(h.drain_queue().is_empty(), "3 is still missing");
    let fill = h.msg(
        "4",
        3,
        &[
            (tags::POSS_DUP_FLAG, "Y"),
            (tags::GAP_FILL_FLAG, "Y"),
            (tags::NEW_SEQ_NO, "4"),
        ],
    );
    assert_eq!(h.feed(&fill), Outcome::Handled);
    assert_eq!(
        h.drain_queue(),
        [(4, Outcome::Deliver), (5, Outcome::Deliver)]
    );
    assert_eq!(h.s.next_target_seq(), 6);
    assert!(!h.s.resend_pending());
    assert_eq!(h.s.queued_count(), 0);
    // Copies of 4 and 5 (a counterparty that resends more than asked): ignored.
    for seq in 4..=5 {
        assert_eq!(h.feed(&h.msg("D", seq, &resent)), Outcome::Handled);
    }
    assert!(h.out.is_empty());
    assert_eq!(h.feed(&h.msg("D", 6, &[])), Outcome::Deliver);
}

#[test]
fn t2b_the_queue_is_bounded_and_what_it_drops_is_asked_for_again() {
    let h = Harness::logged_on();
    let first = h.msg("D", 3, &[(tags::CL_ORD_ID, "c3")]);
    let bound = first.len() + 10;
    let mut h = Harness::logged_on_with(|c| c.max_queued_bytes = bound);
    assert_eq!(h.feed(&first), Outcome::Handled);
    assert_eq!(
        h.feed(&h.msg("D", 4, &[(tags::CL_ORD_ID, "c4")])),
        Outcome::Handled
    );
    assert_eq!(h.s.queued_count(), 1, "4 is past the bound: dropped");
    let out = h.take();
    assert_eq!(types(&out), ["2"]);
    assert_eq!(
        (out[0].num(tags::BEGIN_SEQ_NO), out[0].num(tags::END_SEQ_NO)),
        (2, 2)
    );
    // The resend fills 2, then 3 comes from the queue; 4, dropped, is asked for again (to
    // the end) and comes with that resend.
    let orig = ts(NOW - SEC);
    let resent = [
        (tags::POSS_DUP_FLAG, "Y"),
        (tags::ORIG_SENDING_TIME, orig.as_str()),
    ];
    assert_eq!(h.feed(&h.msg("D", 2, &resent)), Outcome::Deliver);
    assert_eq!(h.drain_queue(), [(3, Outcome::Deliver)]);
    let out = h.take();
    assert_eq!(types(&out), ["2"]);
    assert_eq!(
        (out[0].num(tags::BEGIN_SEQ_NO), out[0].num(tags::END_SEQ_NO)),
        (4, 0)
    );
    assert_eq!(h.feed(&h.msg("D", 4, &resent)), Outcome::Deliver);
    assert!(h.drain_queue().is_empty());
    assert!(!h.s.resend_pending());
    assert!(h.out.is_empty());
}

#[test]
fn t10a_a_gap_fill_above_the_gap_is_queued_and_applied_in_turn() {
    let mut h = Harness::logged_on();
    let fill = h.msg(
        "4",
        3,
        &[(tags::GAP_FILL_FLAG, "Y"), (tags::NEW_SEQ_NO, "6")],
    );
    assert_eq!(h.feed(&fill), Outcome::Handled);
    assert_eq!(types(&h.take()), ["2"]);
    assert_eq!(h.feed(&h.msg("0", 2, &[])), Outcome::Handled);
    assert_eq!(h.drain_queue(), [(3, Outcome::Handled)]);
    assert_eq!(h.s.next_target_seq(), 6);
}

#[test]
fn t11_a_reset_is_processed_whatever_its_msg_seq_num_and_the_session_goes_on() {
    let mut h = Harness::logged_on();
    // No MsgSeqNum at all, or 0: still a Reset.
    let t = ts(h.now);
    let no_seq = raw(
        version().name(),
        "4",
        &[
            (tags::SENDER_COMP_ID, "TRADER1"),
            (tags::TARGET_COMP_ID, "RIALTO"),
            (tags::SENDING_TIME, &t),
            (tags::NEW_SEQ_NO, "5"),
        ],
    );
    assert_eq!(h.feed(&no_seq), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 5);
    let zero = h.msg(
        "4",
        0,
        &[(tags::GAP_FILL_FLAG, "N"), (tags::NEW_SEQ_NO, "7")],
    );
    assert_eq!(h.feed(&zero), Outcome::Handled);
    assert_eq!(h.s.next_target_seq(), 7);
    // 11c: below the expected number: Reject 5 on NewSeqNo, and nothing else changes.
    let lower = h.msg("4", 7, &[(tags::NEW_SEQ_NO, "3")]);
    assert_eq!(h.feed(&lower), Outcome::Handled);
    let out = h.take();
    assert_eq!(types(&out), ["3"]);
    assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 5);
    assert_eq!(out[0].num(tags::REF_TAG_ID), 36);
    assert_eq!(out[0].num(tags::REF_SEQ_NUM), 7);
    assert_eq!(
        out[0].get(tags::TEXT),
        Some("Value is incorrect (out of range) for this tag, field=36")
    );
    assert!(h.s.is_logged_on());
    assert_eq!(h.feed(&h.msg("0", 7, &[])), Outcome::Handled);
    assert!(h.out.is_empty());
    assert_eq!(h.s.next_target_seq(), 8);
}

/// Feeds `msg` (in sequence) and returns the Reject it gets; the number is used up.
fn rejected_admin(h: &mut Harness, msg: &[u8]) -> Msg {
    let expected = h.s.next_target_seq();
    assert_eq!(h.feed(msg), Outcome::Handled);
    let mut out = h.take();
    assert_eq!(types(&out), ["3"]);
    assert_eq!(h.s.next_target_seq(), expected + 1);
    assert!(h.s.is_logged_on());
    out.remove(0)
}

#[test]
fn t14_session_messages_are_checked_against_the_dictionary() {
    let mut h = Harness::logged_on();
    // (the tail after the header, reason, RefTagID, Text)
    let cases = [
        // 14a: a tag the version does not define (FIX 5.0 SP2 defines 999, LegUnitOfMeasure:
        // there it is only not defined for a Heartbeat).
        if version() == Version::Fixt11 {
            (
                "999=HI|",
                2,
                999,
                "Tag not defined for this message type, field=999",
            )
        } else {
            ("999=HI|", 0, 999, "Invalid tag number, field=999")
        },
        // 14c: a tag defined, but not for a Heartbeat.
        (
            "55=IBM|",
            2,
            55,
            "Tag not defined for this message type, field=55",
        ),
        // 14g: a header field after the body.
        (
            "112=T|97=N|",
            14,
            97,
            "Tag specified out of required order, field=97",
        ),
        // 14h: a body tag twice.
        (
            "112=T|112=U|",
            13,
            112,
            "Tag appears more than once, field=112",
        ),
        // User-defined tags are refused unless allowed.
        ("5001=x|", 0, 5001, "Invalid tag number, field=5001"),
    ];
    for (tail, reason, tag, text) in cases {
        let seq = h.s.next_target_seq();
        let m = with_raw_tail(&h, "0", seq, tail);
        let r = rejected_admin(&mut h, &m);
        assert_eq!(r.num(tags::SESSION_REJECT_REASON), reason, "{tail}");
        assert_eq!(r.num(tags::REF_TAG_ID), tag, "{tail}");
        assert_eq!(r.num(tags::REF_SEQ_NUM), seq, "{tail}");
        assert_eq!(r.get(tags::REF_MSG_TYPE), Some("0"));
        assert_eq!(r.get(tags::TEXT), Some(text), "{tail}");
    }
    // 14b: a TestRequest without TestReqID; 14f: a ResendRequest with a word for a number.
    let seq = h.s.next_target_seq();
    let m = h.msg("1", seq, &[]);
    let r = rejected_admin(&mut h, &m);
    assert_eq!(r.get(tags::TEXT), Some("Required tag missing, field=112"));
    let seq = h.s.next_target_seq();
    let bad = h.msg(
        "2",
        seq,
        &[(tags::BEGIN_SEQ_NO, "one"), (tags::END_SEQ_NO, "0")],
    );
    let r = rejected_admin(&mut h, &bad);
    assert_eq!(r.num(tags::SESSION_REJECT_REASON), 6);
    assert_eq!(
        r.get(tags::TEXT),
        Some("Incorrect data format for value, field=7")
    );
}

#[test]
fn t14_user_defined_tags_pass_when_allowed() {
    let mut h = Harness::logged_on_with(|c| c.allow_user_defined_tags = true);
    assert_eq!(
        h.feed(&with_raw_tail(&h, "0", 2, "5001=x|")),
        Outcome::Handled
    );
    assert!(h.out.is_empty());
    // Below 5000 a tag is never user-defined.
    let m = with_raw_tail(&h, "0", 3, "4999=x|");
    let r = rejected_admin(&mut h, &m);
    assert_eq!(r.num(tags::SESSION_REJECT_REASON), 0);
}

#[test]
fn t2k_a_missing_or_empty_comp_id_is_rejected_and_the_session_goes_on() {
    let mut h = Harness::logged_on();
    let t = ts(h.now);
    let without_target = raw(
        version().name(),
        "0",
        &[
            (tags::SENDER_COMP_ID, "TRADER1"),
            (tags::MSG_SEQ_NUM, "2"),
            (tags::SENDING_TIME, &t),
        ],
    );
    let r = rejected_admin(&mut h, &without_target);
    assert_eq!(r.num(tags::SESSION_REJECT_REASON), 1);
    assert_eq!(r.num(tags::REF_TAG_ID), 56);
    assert_eq!(r.get(tags::TEXT), Some("Required tag missing, field=56"));
    let empty_target = with_raw_tail(&h, "0", 3, "").replace_target_with_empty();
    let r = rejected_admin(&mut h, &empty_target);
    assert_eq!(r.num(tags::SESSION_REJECT_REASON), 4);
    assert_eq!(r.num(tags::REF_TAG_ID), 56);
    assert_eq!(h.feed(&h.msg("0", 4, &[])), Outcome::Handled);
    assert!(h.out.is_empty());
}

trait EmptyTarget {
    fn replace_target_with_empty(self) -> Vec<u8>;
}

impl EmptyTarget for Vec<u8> {
    /// The same message with `56=` empty (BodyLength and CheckSum recomputed).
    fn replace_target_with_empty(self) -> Vec<u8> {
        let (frame, _) = next_frame(&self, 1 << 20).unwrap().unwrap();
        let fields: Vec<(u32, String)> = frame
            .fields()
            .map(|f| f.unwrap())
            .filter(|f| f.tag != tags::MSG_TYPE)
            .map(|f| (f.tag, String::from_utf8(f.value.to_vec()).unwrap()))
            .collect();
        let mut out = Vec::new();
        let mut w = MessageWriter::begin(&mut out, frame.begin_string, frame.msg_type);
        let mut tail = String::new();
        for (tag, value) in &fields {
            match *tag {
                tags::BEGIN_STRING | tags::BODY_LENGTH | tags::CHECK_SUM => {}
                tags::TARGET_COMP_ID => tail.push_str("56=\u{1}"),
                _ => tail.push_str(&format!("{tag}={value}\u{1}")),
            }
        }
        w.raw(tail.as_bytes());
        w.finish();
        out
    }
}

#[test]
fn t18a_third_party_addressed_messages_are_accepted_and_answers_reverse_the_routing() {
    let mut h = Harness::logged_on();
    // A Reject: OnBehalfOf* come back as DeliverTo*.
    let m = with_raw_tail(&h, "0", 2, "115=CLIENT|116=DESK|144=LDN|999=HI|");
    let r = rejected_admin(&mut h, &m);
    assert_eq!(r.get(tags::DELIVER_TO_COMP_ID), Some("CLIENT"));
    assert_eq!(r.get(tags::DELIVER_TO_SUB_ID), Some("DESK"));
    assert_eq!(r.get(tags::DELIVER_TO_LOCATION_ID), Some("LDN"));
    assert_eq!(r.get(tags::ON_BEHALF_OF_COMP_ID), None);
    // A reply to an application message: DeliverTo* come back as OnBehalfOf*.
    let order = with_raw_tail(&h, "D", 3, "128=BROKER|129=B1|145=NYC|11=c1|");
    assert_eq!(h.feed(&order), Outcome::Deliver);
    h.s.business_reject(
        &BusinessReject {
            ref_seq_num: 3,
            ref_msg_type: b"D",
            ref_id: Some(b"c1"),
            reason: business_reject_reason::OTHER,
            text: "no",
        },
        h.now,
        &mut h.out,
    )
    .unwrap();
    h.s.send_reply(
        b"8",
        h.now,
        |w| {
            w.str(tags::CL_ORD_ID, b"c1");
        },
        &mut h.out,
    )
    .unwrap();
    // A message that answers nothing carries no routing.
    h.send_order_ack("c2");
    let out = h.take();
    assert_eq!(types(&out), ["j", "8", "8"]);
    for reply in &out[..2] {
        assert_eq!(reply.get(tags::ON_BEHALF_OF_COMP_ID), Some("BROKER"));
        assert_eq!(reply.get(tags::ON_BEHALF_OF_SUB_ID), Some("B1"));
        assert_eq!(reply.get(tags::ON_BEHALF_OF_LOCATION_ID), Some("NYC"));
    }
    assert_eq!(out[2].get(tags::ON_BEHALF_OF_COMP_ID), None);
    // The next message without routing: none on its Reject.
    let m = with_raw_tail(&h, "0", 4, "999=HI|");
    let r = rejected_admin(&mut h, &m);
    assert_eq!(r.get(tags::DELIVER_TO_COMP_ID), None);
}

#[test]
fn t6_each_session_makes_its_own_test_req_ids() {
    let mut a = Harness::logged_on();
    let mut b = Harness::logged_on();
    a.send_order_ack("x1");
    a.send_order_ack("x2");
    a.take();
    let mut ids = Vec::new();
    for h in [&mut a, &mut b] {
        h.now = NOW + 36 * SEC;
        h.timer();
        let out = h.take();
        let test_request = out.iter().find(|m| m.msg_type == "1").unwrap();
        let id = test_request.get(tags::TEST_REQ_ID).unwrap().to_string();
        // Its own MsgSeqNum and SendingTime: unique within the session, whatever the
        // other sessions do.
        assert_eq!(id, format!("TEST-{}-{}", test_request.seq(), ts(h.now)));
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
    // Session b's next TestRequest is not numbered after a's.
    b.feed(&b.msg("0", 2, &[(tags::TEST_REQ_ID, &ids[1])]));
    b.now += 36 * SEC;
    b.timer();
    let out = b.take();
    let test_request = out.iter().find(|m| m.msg_type == "1").unwrap();
    assert_eq!(
        test_request.get(tags::TEST_REQ_ID).unwrap(),
        format!("TEST-{}-{}", test_request.seq(), ts(b.now))
    );
}

#[test]
fn t2m_t2t_t3b_t3e_bad_body_length_field_order_or_checksum_are_garbled_and_ignored() {
    let mut h = Harness::logged_on();
    let good = h.msg("D", 2, &[(tags::CL_ORD_ID, "c1")]);
    let text = String::from_utf8(good.clone()).unwrap();
    let body_length: usize = text.split('\u{1}').nth(1).unwrap()[2..].parse().unwrap();
    let cases = [
        // 2m: BodyLength one short.
        text.replacen(
            &format!("9={body_length}\u{1}"),
            &format!("9={}\u{1}", body_length - 1),
            1,
        ),
        // 2t: MsgType before BodyLength.
        text.replacen(
            &format!("9={body_length}\u{1}35=D\u{1}"),
            &format!("35=D\u{1}9={body_length}\u{1}"),
            1,
        ),
        // 3b: a wrong CheckSum.
        {
            let mut t = text.clone();
            let sum = &t[t.len() - 4..t.len() - 1];
            let wrong = format!("{:03}", (sum.parse::<u32>().unwrap() + 1) % 256);
            t.replace_range(t.len() - 4..t.len() - 1, &wrong);
            t
        },
        // 3e: a CheckSum of four digits, then one not delimited by SOH.
        {
            let mut t = text.clone();
            t.insert(t.len() - 4, '0');
            t
        },
        {
            let mut t = text.clone();
            t.replace_range(t.len() - 1.., "|");
            t
        },
    ];
    for bad in cases {
        assert_ne!(bad.as_bytes(), &good[..]);
        let garbled = next_frame(bad.as_bytes(), 1 << 20).unwrap_err();
        h.s.on_garbled(&bad.as_bytes()[..garbled.skip], h.now)
            .unwrap();
        assert!(h.out.is_empty());
        assert_eq!(h.s.next_target_seq(), 2, "no number used up");
    }
    assert_eq!(h.s.garbled_count(), 5);
    assert_eq!(h.feed(&good), Outcome::Deliver);
}

#[test]
fn t17b_an_unsupported_encrypt_method_gets_reject_7_then_a_logout() {
    let mut h = Harness::new(version());
    let logon = h.msg(
        "A",
        1,
        &[(tags::ENCRYPT_METHOD, "1"), (tags::HEART_BT_INT, "30")],
    );
    assert_eq!(h.feed(&logon), Outcome::Disconnect);
    let out = h.take();
    assert_eq!(types(&out), ["3", "5"]);
    assert_eq!((out[0].seq(), out[1].seq()), (1, 2));
    assert_eq!(out[0].num(tags::REF_SEQ_NUM), 1);
    if version() >= Version::Fix42 {
        assert_eq!(out[0].num(tags::SESSION_REJECT_REASON), 7);
        assert_eq!(out[0].num(tags::REF_TAG_ID), 98);
        assert_eq!(out[0].get(tags::REF_MSG_TYPE), Some("A"));
    } else {
        assert_eq!(out[0].get(tags::TEXT), Some("Decryption problem, field=98"));
    }
    assert_eq!(
        out[1].get(tags::TEXT),
        Some("EncryptMethod (98) not supported: only 0 (none)")
    );
    assert_eq!(h.s.next_target_seq(), 2, "the Logon's number is used");
    assert_eq!(h.s.next_sender_seq(), 3);
}
