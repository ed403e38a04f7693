//! The data dictionaries and message validation, through the public API.

use rialto_fix::dict::{self, Kind, MsgTypeStatus, Violation, reason};
use rialto_fix::parse::checksum;
use rialto_fix::{ApplVersion, next_frame};

const HEADER: &str = "49=CLIENT|56=RIALTO|34=2|52=20261122-10:00:00.000|";
const NOW: &str = "20261122-10:00:00.123";

/// A whole message: `|` stands for SOH; BodyLength and CheckSum are computed.
fn message(version: ApplVersion, body: &str) -> Vec<u8> {
    let body = body.replace('|', "\u{1}");
    let begin = std::str::from_utf8(version.begin_string()).unwrap();
    let mut out = format!("8={begin}\u{1}9={}\u{1}{body}", body.len()).into_bytes();
    let sum = checksum(&out);
    out.extend_from_slice(format!("10={sum:03}\u{1}").as_bytes());
    out
}

fn check(version: ApplVersion, body: &str) -> Result<(), Violation> {
    let bytes = message(version, body);
    let (frame, len) = next_frame(&bytes, 1 << 16)
        .expect("well framed")
        .expect("whole");
    assert_eq!(len, bytes.len());
    dict::validate(version, &frame)
}

/// `35=<type>|` + the standard header + `body`.
fn app(version: ApplVersion, msg_type: &str, body: &str) -> Result<(), Violation> {
    check(version, &format!("35={msg_type}|{HEADER}{body}"))
}

fn rejected(result: Result<(), Violation>, reason: u32, tag: Option<u32>) {
    match result {
        Err(v) => assert_eq!((v.reason, v.ref_tag), (reason, tag), "{v}"),
        Ok(()) => panic!("accepted; expected reason {reason} for tag {tag:?}"),
    }
}

/// The versions with market data, security lists and BusinessMessageReject (FIX 4.2 on).
const ALL: [ApplVersion; 6] = [
    ApplVersion::Fix42,
    ApplVersion::Fix43,
    ApplVersion::Fix44,
    ApplVersion::Fix50,
    ApplVersion::Fix50Sp1,
    ApplVersion::Fix50Sp2,
];

/// One valid message of every type in scope, per version (bodies after the header).
fn samples(version: ApplVersion) -> Vec<(&'static str, String)> {
    let v42 = version == ApplVersion::Fix42;
    let v50 = version >= ApplVersion::Fix50;
    let exec_trans = if v42 { "20=0|" } else { "" };
    let handl_inst = if version <= ApplVersion::Fix43 {
        "21=1|"
    } else {
        ""
    };
    let mut out = vec![
        ("0", String::new()),
        ("0", "112=TEST1|".to_string()),
        ("1", "112=TEST1|".to_string()),
        ("2", "7=1|16=0|".to_string()),
        ("3", "45=7|371=44|372=D|373=5|58=bad price|".to_string()),
        ("4", "123=Y|36=10|".to_string()),
        ("5", "58=bye|".to_string()),
        (
            "A",
            format!("98=0|108=30|141=Y|{}", if v50 { "1137=9|" } else { "" }),
        ),
        (
            "D",
            format!("11=ORD1|{handl_inst}55=BTC-USD|54=1|60={NOW}|38=5|40=2|44=100.25|59=1|"),
        ),
        (
            "F",
            format!("41=ORD1|11=ORD2|55=BTC-USD|54=1|60={NOW}|38=5|"),
        ),
        (
            "G",
            format!("41=ORD1|11=ORD3|{handl_inst}55=BTC-USD|54=2|60={NOW}|38=7|40=2|44=101|"),
        ),
        ("H", "11=ORD1|55=BTC-USD|54=1|".to_string()),
        (
            "8",
            format!(
                "37=9|11=ORD1|17=E1|{exec_trans}150={}|39=1|55=BTC-USD|54=1|38=5|32=2|31=100.25|151=3|14=2|6=100.25|60={NOW}|",
                if v42 { "1" } else { "F" }
            ),
        ),
        (
            "9",
            "37=9|11=ORD2|41=ORD1|39=0|102=1|434=1|58=too late|".to_string(),
        ),
        ("j", "45=3|372=E|380=3|58=unsupported|".to_string()),
        (
            "V",
            "262=MD1|263=1|264=10|267=2|269=0|269=1|146=1|55=BTC-USD|".to_string(),
        ),
        (
            "W",
            "262=MD1|55=BTC-USD|268=2|269=0|270=100.25|271=3|269=1|270=100.5|271=1.5|".to_string(),
        ),
        (
            "X",
            format!(
                "262=MD1|268=2|279=0|269=0|{}270=100.25|271=3|279=2|269=1|{}270=100.5|",
                if v42 { "" } else { "55=BTC-USD|" },
                if v42 { "" } else { "55=BTC-USD|" }
            ),
        ),
        ("Y", "262=MD1|281=0|".to_string()),
        ("c", "320=SD1|321=3|55=BTC-USD|".to_string()),
        (
            "d",
            format!(
                "320=SD1|322=R1|{}55=BTC-USD|",
                if v42 { "323=4|393=1|" } else { "323=4|" }
            ),
        ),
    ];
    if !v42 {
        out.extend([
            ("q", format!("11=MC1|530=7|60={NOW}|")),
            (
                "r",
                format!(
                    "{}37=0|530=7|531=7|533=4|",
                    if version >= ApplVersion::Fix50Sp1 {
                        "1369=MA1|11=MC1|"
                    } else {
                        "11=MC1|"
                    }
                ),
            ),
            ("x", "320=SL1|559=4|".to_string()),
            (
                "y",
                "320=SL1|322=R2|560=0|146=2|55=BTC-USD|15=USD|55=ETH-USD|15=USD|".to_string(),
            ),
        ]);
    }
    out
}

#[test]
fn a_valid_message_of_every_type_in_scope_passes() {
    for version in ALL {
        let samples = samples(version);
        for (msg_type, body) in &samples {
            if let Err(v) = app(version, msg_type, body) {
                panic!("{} {msg_type} {body}: {v}", version.name());
            }
        }
        // Every type in scope has a sample.
        let (session, app_dict) = dict::dictionaries(version);
        for m in session.messages.iter().chain(app_dict.messages) {
            let t = std::str::from_utf8(m.msg_type).unwrap();
            assert!(
                samples.iter().any(|(s, _)| *s == t),
                "{} {t} has no sample",
                version.name()
            );
        }
    }
}

#[test]
fn the_scope_is_as_documented() {
    let admin = ["0", "1", "2", "3", "4", "5", "A"];
    let app = [
        "D", "F", "G", "H", "q", "r", "8", "9", "j", "V", "W", "X", "Y", "x", "y", "c", "d",
    ];
    for version in ALL {
        for t in admin.iter().chain(&app) {
            let expected = if version == ApplVersion::Fix42 && ["q", "r", "x", "y"].contains(t) {
                MsgTypeStatus::Undefined
            } else {
                MsgTypeStatus::InScope
            };
            assert_eq!(
                dict::msg_type_status(version, t.as_bytes()),
                expected,
                "{t}"
            );
        }
        // NewOrderList: defined everywhere, not in Rialto's scope.
        assert_eq!(
            dict::msg_type_status(version, b"E"),
            MsgTypeStatus::OutOfScope
        );
        assert!(dict::is_defined_msg_type(version, b"E"));
        assert!(!dict::is_defined_msg_type(version, b"ZZ"));
    }
    let side = dict::field(ApplVersion::Fix44, 54).unwrap();
    assert_eq!((side.name, side.kind), ("Side", Kind::Char));
    assert!(side.values.contains(&&b"1"[..]));
    assert_eq!(
        dict::field(ApplVersion::Fix50Sp2, 1137).unwrap().name,
        "DefaultApplVerID"
    );
    assert_eq!(
        dict::field(ApplVersion::Fix50Sp2, 44).unwrap().kind,
        Kind::Price
    );
}

/// For every message in every dictionary, a message holding exactly its required fields (and
/// one entry of each required group) passes: the tables agree with themselves.
#[test]
fn the_required_fields_of_every_message_are_enough() {
    fn sample(kind: Kind, values: &[&[u8]]) -> String {
        if let Some(v) = values.first() {
            return String::from_utf8(v.to_vec()).unwrap();
        }
        match kind {
            Kind::Int | Kind::Length | Kind::NumInGroup | Kind::SeqNum | Kind::DayOfMonth => "1",
            Kind::Float | Kind::Price | Kind::Qty | Kind::Amt | Kind::Percentage => "1.5",
            Kind::PriceOffset => "-0.5",
            Kind::Char | Kind::MultipleCharValue => "X",
            Kind::Boolean => "Y",
            Kind::UtcTimestamp => NOW,
            Kind::UtcDateOnly | Kind::LocalMktDate => "20261122",
            Kind::UtcTimeOnly => "10:00:00",
            Kind::MonthYear => "202612",
            Kind::TzTimeOnly => "10:00Z",
            Kind::TzTimestamp => "20261122-10:00:00Z",
            _ => "x",
        }
        .to_string()
    }
    /// `group`: the section is a group entry, which always starts with its delimiter.
    fn fill(
        version: ApplVersion,
        d: &dict::Dictionary,
        section: &dict::Section,
        group: bool,
        out: &mut String,
    ) {
        for (i, e) in section.entries.iter().enumerate() {
            if !(e.required || group && i == 0) {
                continue;
            }
            let def = dict::field(version, e.tag).unwrap();
            match e.group {
                Some(g) => {
                    out.push_str(&format!("{}=1|", e.tag));
                    fill(version, d, &d.group(g).unwrap().members, true, out);
                }
                None => out.push_str(&format!("{}={}|", e.tag, sample(def.kind, def.values))),
            }
        }
    }
    for version in ApplVersion::ALL {
        let (session, app_dict) = dict::dictionaries(version);
        for d in [session, app_dict] {
            for m in d.messages {
                let mut body = String::new();
                fill(version, d, &m.body, false, &mut body);
                let t = std::str::from_utf8(m.msg_type).unwrap();
                if let Err(v) = app(version, t, &body) {
                    panic!("{} {} {body}: {v}", version.name(), m.name);
                }
            }
        }
    }
}

#[test]
fn unknown_tags_are_reason_0_unless_user_defined_ones_are_allowed() {
    let allow = dict::Options {
        allow_user_defined_tags: true,
    };
    for version in ALL {
        rejected(
            app(version, "0", "4999=x|"),
            reason::INVALID_TAG_NUMBER,
            Some(4999),
        );
        // User-defined tags: rejected by default, accepted when allowed.
        rejected(
            app(version, "0", "5001=x|9999=y|"),
            reason::INVALID_TAG_NUMBER,
            Some(5001),
        );
        let bytes = message(version, &format!("35=0|{HEADER}5001=x|9999=y|"));
        let (frame, _) = next_frame(&bytes, 1 << 16).unwrap().unwrap();
        assert_eq!(dict::validate_with(version, &frame, allow), Ok(()));
        let bytes = message(version, &format!("35=0|{HEADER}4999=x|"));
        let (frame, _) = next_frame(&bytes, 1 << 16).unwrap().unwrap();
        assert_eq!(
            dict::validate_with(version, &frame, allow).map_err(|v| v.ref_tag),
            Err(Some(4999)),
            "below 5000 is never user-defined"
        );
    }
    // Tag 0 and a ten-digit tag cannot be parsed.
    rejected(
        app(ApplVersion::Fix44, "0", "0=x|"),
        reason::INVALID_TAG_NUMBER,
        None,
    );
    rejected(
        app(ApplVersion::Fix44, "0", "1234567890=x|"),
        reason::INVALID_TAG_NUMBER,
        None,
    );
}

#[test]
fn missing_required_fields_are_reason_1() {
    let v = ApplVersion::Fix44;
    rejected(
        app(v, "D", &format!("55=X|54=1|60={NOW}|40=1|")),
        reason::REQUIRED_TAG_MISSING,
        Some(11),
    );
    rejected(
        check(v, "35=0|56=RIALTO|34=2|52=20261122-10:00:00|"),
        reason::REQUIRED_TAG_MISSING,
        Some(49),
    );
    // Inside a group entry: FIX 4.2's snapshot entries require MDEntryPx (270).
    rejected(
        app(ApplVersion::Fix42, "W", "55=X|268=1|269=0|271=5|"),
        reason::REQUIRED_TAG_MISSING,
        Some(270),
    );
    // FIXT.1.1 Logon needs DefaultApplVerID.
    rejected(
        app(ApplVersion::Fix50Sp2, "A", "98=0|108=30|"),
        reason::REQUIRED_TAG_MISSING,
        Some(1137),
    );
}

#[test]
fn a_known_tag_outside_its_message_is_reason_2() {
    for version in ALL {
        rejected(
            app(version, "0", "112=T|55=BTC-USD|"),
            reason::TAG_NOT_DEFINED_FOR_MSG_TYPE,
            Some(55),
        );
    }
    // A group member outside its group.
    rejected(
        app(
            ApplVersion::Fix44,
            "V",
            "262=1|263=1|264=0|269=0|267=1|269=0|146=1|55=X|",
        ),
        reason::TAG_NOT_DEFINED_FOR_MSG_TYPE,
        Some(269),
    );
}

#[test]
fn an_empty_value_is_reason_4() {
    rejected(
        app(ApplVersion::Fix44, "5", "58=|"),
        reason::TAG_WITHOUT_VALUE,
        Some(58),
    );
}

#[test]
fn bad_enum_values_are_reason_5() {
    let v = ApplVersion::Fix44;
    rejected(
        app(v, "D", &format!("11=A|55=X|54=Z|60={NOW}|40=2|44=1|38=1|")),
        reason::VALUE_INCORRECT,
        Some(54),
    );
    // A multiple-value field: every value must be allowed (ExecInst 18).
    assert_eq!(
        app(
            v,
            "D",
            &format!("11=A|55=X|54=1|60={NOW}|40=2|44=1|38=1|18=6 E|")
        ),
        Ok(())
    );
    rejected(
        app(
            v,
            "D",
            &format!("11=A|55=X|54=1|60={NOW}|40=2|44=1|38=1|18=6 ~|"),
        ),
        reason::VALUE_INCORRECT,
        Some(18),
    );
}

#[test]
fn bad_formats_are_reason_6() {
    let v = ApplVersion::Fix44;
    let order = |extra: &str| app(v, "D", &format!("11=A|55=X|54=1|40=2|{extra}"));
    rejected(
        order(&format!("60={NOW}|38=abc|")),
        reason::INCORRECT_DATA_FORMAT,
        Some(38),
    );
    rejected(
        order(&format!("60={NOW}|38=1e3|")),
        reason::INCORRECT_DATA_FORMAT,
        Some(38),
    );
    rejected(
        order("60=20261122 10:00:00|"),
        reason::INCORRECT_DATA_FORMAT,
        Some(60),
    );
    rejected(
        order(&format!("60={NOW}|114=y|")),
        reason::INCORRECT_DATA_FORMAT,
        Some(114),
    );
    rejected(
        order(&format!("60={NOW}|432=20261322|")),
        reason::INCORRECT_DATA_FORMAT,
        Some(432),
    );
    rejected(
        check(v, "35=0|49=A|56=B|34=x2|52=20261122-10:00:00|"),
        reason::INCORRECT_DATA_FORMAT,
        Some(34),
    );
    rejected(
        app(v, "V", "262=1|263=1|264=x|267=1|269=0|146=1|55=X|"),
        reason::INCORRECT_DATA_FORMAT,
        Some(264),
    );
}

#[test]
fn message_types_undefined_or_out_of_scope() {
    for version in ALL {
        rejected(app(version, "ZZ", ""), reason::INVALID_MSG_TYPE, Some(35));
        // Defined but not Rialto's: the header is checked, the body only for tag numbers.
        assert_eq!(
            app(version, "E", "66=L1|68=1|73=1|11=A|67=1|55=X|54=1|"),
            Ok(())
        );
        rejected(
            app(version, "E", "66=L1|4999=1|"),
            reason::INVALID_TAG_NUMBER,
            Some(4999),
        );
        rejected(
            check(version, "35=E|56=RIALTO|34=2|52=20261122-10:00:00|66=L|"),
            reason::REQUIRED_TAG_MISSING,
            Some(49),
        );
    }
    rejected(
        app(ApplVersion::Fix42, "q", ""),
        reason::INVALID_MSG_TYPE,
        Some(35),
    );
}

#[test]
fn a_repeated_tag_is_reason_13() {
    let v = ApplVersion::Fix44;
    rejected(
        app(v, "D", &format!("11=A|11=B|55=X|54=1|60={NOW}|40=1|")),
        reason::TAG_APPEARS_MORE_THAN_ONCE,
        Some(11),
    );
    rejected(
        check(v, "35=0|49=A|49=A|56=B|34=2|52=20261122-10:00:00|"),
        reason::TAG_APPEARS_MORE_THAN_ONCE,
        Some(49),
    );
    rejected(
        app(v, "0", "35=0|"),
        reason::TAG_APPEARS_MORE_THAN_ONCE,
        Some(35),
    );
}

#[test]
fn fields_out_of_their_section_are_reason_14() {
    let v = ApplVersion::Fix44;
    rejected(
        app(v, "0", "112=T|50=SUB|"),
        reason::TAG_OUT_OF_ORDER,
        Some(50),
    );
    rejected(
        app(v, "0", "93=2|89=ab|112=T|"),
        reason::TAG_OUT_OF_ORDER,
        Some(112),
    );
    // The trailer's signature after the body is fine.
    assert_eq!(app(v, "0", "112=T|93=2|89=ab|"), Ok(()));
}

#[test]
fn group_entries_out_of_order_are_reason_15() {
    let v = ApplVersion::Fix44;
    // The entry does not start with MDEntryType (269), the delimiter.
    rejected(
        app(v, "W", "55=X|268=1|270=1|269=0|"),
        reason::REPEATING_GROUP_FIELDS_OUT_OF_ORDER,
        Some(270),
    );
    // Members out of dictionary order: MDEntrySize (271) before MDEntryPx (270).
    rejected(
        app(v, "W", "55=X|268=1|269=0|271=1|270=1|"),
        reason::REPEATING_GROUP_FIELDS_OUT_OF_ORDER,
        Some(270),
    );
}

#[test]
fn wrong_group_counts_are_reason_16() {
    let v = ApplVersion::Fix44;
    rejected(
        app(v, "W", "55=X|268=2|269=0|270=1|"),
        reason::INCORRECT_NUM_IN_GROUP,
        Some(268),
    );
    rejected(
        app(v, "W", "55=X|268=1|269=0|270=1|269=1|270=2|"),
        reason::INCORRECT_NUM_IN_GROUP,
        Some(268),
    );
    rejected(
        app(v, "W", "55=X|268=0|269=0|270=1|"),
        reason::INCORRECT_NUM_IN_GROUP,
        Some(268),
    );
    rejected(
        app(v, "W", "55=X|268=x|"),
        reason::INCORRECT_DATA_FORMAT,
        Some(268),
    );
}

#[test]
fn nested_groups_validate() {
    // NewOrderSingle with Parties (453) holding PtysSubGrp (802), FIX 4.4 and 5.0SP2.
    for version in [ApplVersion::Fix44, ApplVersion::Fix50Sp2] {
        let body = format!(
            "11=A|453=2|448=FIRM1|447=D|452=1|802=1|523=DESK|803=4|448=TRADER|447=D|452=11|\
             55=X|54=1|60={NOW}|38=1|40=1|"
        );
        assert_eq!(app(version, "D", &body), Ok(()), "{}", version.name());
        // The inner count is wrong.
        let body = format!("11=A|453=1|448=FIRM1|802=2|523=DESK|55=X|54=1|60={NOW}|40=1|");
        rejected(
            app(version, "D", &body),
            reason::INCORRECT_NUM_IN_GROUP,
            Some(802),
        );
    }
}

#[test]
fn data_fields_may_hold_soh() {
    let v = ApplVersion::Fix44;
    // RawData (96) of 5 bytes with a SOH (written '|') in the middle.
    assert_eq!(app(v, "A", "98=0|108=30|95=5|96=ab|cd|"), Ok(()));
    // EncodedText (355) by EncodedTextLen (354).
    assert_eq!(app(v, "5", "354=3|355=a|b|"), Ok(()));
    // A length that does not match.
    rejected(
        app(v, "A", "98=0|108=30|95=3|96=ab|"),
        reason::INCORRECT_DATA_FORMAT,
        Some(96),
    );
    // Data without its length field.
    rejected(
        app(v, "A", "98=0|108=30|96=ab|"),
        reason::INCORRECT_DATA_FORMAT,
        Some(96),
    );
    // FIX 4.2 types RawDataLength as INT; it still announces RawData.
    assert_eq!(
        app(ApplVersion::Fix42, "A", "98=0|108=30|95=3|96=a|b|"),
        Ok(())
    );
}

/// Messages as QuickFIX/J 2.3.2 writes them (header fields in its order, body fields in tag
/// order, groups in dictionary order), BodyLength and CheckSum recomputed.
#[test]
fn quickfixj_style_messages_pass() {
    let cases: [(ApplVersion, &str); 8] = [
        (
            ApplVersion::Fix44,
            "35=A|34=1|49=BANZAI|52=20261122-04:50:12.345|56=EXEC|98=0|108=30|",
        ),
        (
            ApplVersion::Fix44,
            "35=D|34=2|49=BANZAI|52=20261122-04:50:20.001|56=EXEC|11=1795323020001|21=1|38=100|\
             40=2|44=10.5|54=1|55=MSFT|59=0|60=20261122-04:50:20.001|",
        ),
        (
            ApplVersion::Fix44,
            "35=8|34=2|49=EXEC|52=20261122-04:50:20.010|56=BANZAI|6=0|11=1795323020001|14=0|\
             17=1|31=0|32=0|37=1|38=100|39=0|40=2|44=10.5|54=1|55=MSFT|150=0|151=100|",
        ),
        (
            ApplVersion::Fix42,
            "35=8|34=3|49=EXEC|52=20261122-04:50:21|56=BANZAI|6=10.5|11=1795323020001|14=100|\
             17=2|20=0|31=10.5|32=100|37=1|38=100|39=2|54=1|55=MSFT|150=2|151=0|",
        ),
        (
            ApplVersion::Fix42,
            "35=F|34=4|49=BANZAI|52=20261122-04:50:22|56=EXEC|11=1795323022000|38=100|\
             41=1795323020001|54=1|55=MSFT|60=20261122-04:50:22|",
        ),
        (
            ApplVersion::Fix50Sp2,
            "35=A|34=1|49=BANZAI|52=20261122-04:50:12.345|56=EXEC|98=0|108=30|1137=9|",
        ),
        (
            ApplVersion::Fix50Sp2,
            "35=D|34=2|49=BANZAI|52=20261122-04:50:20.001|56=EXEC|11=1795323020001|38=100|\
             40=1|54=2|55=MSFT|60=20261122-04:50:20.001|",
        ),
        (
            ApplVersion::Fix50Sp2,
            "35=3|34=5|49=EXEC|52=20261122-04:50:25.000|56=BANZAI|45=4|58=Value is incorrect \
             (out of range) for this tag|371=54|372=D|373=5|",
        ),
    ];
    for (version, body) in cases {
        assert_eq!(check(version, body), Ok(()), "{} {body}", version.name());
    }
}

/// Every section of every dictionary (header, trailer, message bodies, group entries), with
/// its dictionary.
fn every_section() -> impl Iterator<Item = (&'static dict::Dictionary, &'static dict::Section)> {
    [dict::FIX42, dict::FIX44, dict::FIXT11, dict::FIX50SP2]
        .into_iter()
        .flat_map(|d| {
            [&d.header, &d.trailer]
                .into_iter()
                .chain(d.messages.iter().map(|m| &m.body))
                .chain(d.groups.iter().map(|g| &g.members))
                .map(move |section| (d, section))
        })
}

#[test]
fn every_entry_names_its_own_field_definition() {
    for (d, section) in every_section() {
        for entry in section.entries {
            let def = &d.fields[usize::from(entry.def)];
            assert_eq!(def.tag, entry.tag, "{}: entry {}", d.name, entry.tag);
        }
    }
}

#[test]
fn every_section_finds_exactly_its_own_tags() {
    for (d, section) in every_section() {
        for tag in 0..2_000 {
            let expected = section.entries.iter().position(|e| e.tag == tag);
            assert_eq!(section.position(tag), expected, "{}: tag {tag}", d.name);
        }
    }
}

/// FIX 4.0 and 4.1: the order flow and the session messages, as those versions define them.
#[test]
fn fix_40_and_41_messages_pass_as_those_versions_define_them() {
    for version in [ApplVersion::Fix40, ApplVersion::Fix41] {
        let v40 = version == ApplVersion::Fix40;
        let cxl_type = if v40 { "125=F|" } else { "" };
        let report = if v40 {
            // No ExecType, LeavesQty or OrigClOrdID; ExecID and quantities are integers.
            "37=9|11=ORD1|17=12|20=0|39=1|55=BTC-USD|54=1|38=5|32=2|31=100.25|14=2|6=100.25|"
        } else {
            "37=9|11=ORD1|17=E1|20=0|150=1|39=1|55=BTC-USD|54=1|38=5|32=2|31=100.25|151=3|14=2|6=100.25|"
        };
        let cancel_reject = if v40 {
            "37=9|11=ORD2|102=1|58=unknown|"
        } else {
            "37=9|11=ORD2|41=ORD1|39=0|102=1|58=unknown|"
        };
        let samples = [
            ("0", String::new()),
            ("1", "112=TEST1|".to_string()),
            ("2", "7=1|16=0|".to_string()),
            ("3", "45=7|58=Required tag missing (tag 11)|".to_string()),
            ("4", "123=Y|36=10|".to_string()),
            ("5", "58=bye|".to_string()),
            ("A", "98=0|108=30|".to_string()),
            (
                "D",
                "11=ORD1|21=1|55=BTC-USD|54=1|38=5|40=2|44=100.25|59=1|".to_string(),
            ),
            (
                "F",
                format!("41=ORD1|11=ORD2|{cxl_type}55=BTC-USD|54=1|38=5|"),
            ),
            (
                "G",
                "41=ORD1|11=ORD3|21=1|55=BTC-USD|54=2|38=7|40=2|44=101|".to_string(),
            ),
            ("H", "11=ORD1|55=BTC-USD|54=1|".to_string()),
            ("8", format!("{report}60=20261122-10:00:00|")),
            ("9", cancel_reject.to_string()),
        ];
        for (msg_type, body) in &samples {
            let header = HEADER.replace(".000", "");
            let result = check(version, &format!("35={msg_type}|{header}{body}"));
            assert_eq!(result, Ok(()), "{version:?} {msg_type} {body}");
        }
        // SessionRejectReason came with FIX 4.2.
        rejected(
            app(version, "3", "45=7|373=5|"),
            reason::INVALID_TAG_NUMBER,
            Some(373),
        );
        // Quantities are integers (shares).
        rejected(
            app(version, "D", "11=O|21=1|55=X|54=1|38=0.5|40=1|"),
            reason::INCORRECT_DATA_FORMAT,
            Some(38),
        );
    }
    rejected(
        app(ApplVersion::Fix40, "A", "98=0|108=30|141=Y|"),
        reason::INVALID_TAG_NUMBER,
        Some(141),
    );
    assert_eq!(app(ApplVersion::Fix41, "A", "98=0|108=30|141=Y|"), Ok(()));
}

/// Each version's MsgTypes: what it lacks is undefined there (a Reject with reason 11), not
/// out of scope.
#[test]
fn each_version_defines_its_own_message_types() {
    let market_data = ["V", "W", "X", "Y"];
    let later = ["q", "r", "x", "y"];
    for version in ApplVersion::ALL {
        for t in [
            "0", "1", "2", "3", "4", "5", "A", "D", "F", "G", "H", "8", "9",
        ] {
            assert_eq!(
                dict::msg_type_status(version, t.as_bytes()),
                MsgTypeStatus::InScope,
                "{version:?} {t}"
            );
        }
        let before_42 = version < ApplVersion::Fix42;
        for t in market_data.iter().chain(&["j", "c", "d"]) {
            let expected = if before_42 {
                MsgTypeStatus::Undefined
            } else {
                MsgTypeStatus::InScope
            };
            assert_eq!(
                dict::msg_type_status(version, t.as_bytes()),
                expected,
                "{version:?} {t}"
            );
        }
        for t in later {
            let expected = if version < ApplVersion::Fix43 {
                MsgTypeStatus::Undefined
            } else {
                MsgTypeStatus::InScope
            };
            assert_eq!(
                dict::msg_type_status(version, t.as_bytes()),
                expected,
                "{version:?} {t}"
            );
        }
        // NewOrderList: defined everywhere, not in Rialto's scope.
        assert_eq!(
            dict::msg_type_status(version, b"E"),
            MsgTypeStatus::OutOfScope
        );
    }
    rejected(
        app(ApplVersion::Fix41, "V", "262=MD1|263=1|264=10|"),
        reason::INVALID_MSG_TYPE,
        Some(35),
    );
}
