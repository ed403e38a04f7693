//! Property tests that throw hostile bytes at the parser and the validator: arbitrary bytes,
//! and valid messages with bits flipped, cut short, SOH or '=' inserted, or fields
//! duplicated (some re-framed with a right BodyLength and CheckSum so that they reach the
//! field walk and the dictionary). Nothing may panic, `next_frame` must always make progress
//! within the buffer, and a frame must lie inside the input.

use proptest::prelude::*;
use rialto_fix::app::NewOrderSingle;
use rialto_fix::dict::{Kind, Violation};
use rialto_fix::parse::checksum;
use rialto_fix::{ApplVersion, Frame, Version, dict, next_frame};

const MAX_LEN: usize = 4096;

/// Valid messages of several kinds and versions, `|` for SOH, without BodyLength/CheckSum.
const SEEDS: [(&str, &str); 8] = [
    (
        "FIX.4.4",
        "35=D|49=C|56=R|34=2|52=20261122-10:00:00.000|11=A|453=1|448=F|447=D|452=1|802=1|523=S|\
         803=4|55=X|54=1|60=20261122-10:00:00|38=5|40=2|44=100.25|",
    ),
    (
        "FIX.4.4",
        "35=W|49=C|56=R|34=3|52=20261122-10:00:00|262=M|55=X|268=2|269=0|270=1.5|271=3|269=1|\
         270=2|271=1|",
    ),
    (
        "FIX.4.4",
        "35=A|49=C|56=R|34=1|52=20261122-10:00:00|98=0|108=30|95=3|96=a|b|",
    ),
    (
        "FIX.4.2",
        "35=8|49=C|56=R|34=4|52=20261122-10:00:00|37=1|17=E|20=0|150=0|39=0|55=X|54=1|151=5|\
         14=0|6=0|",
    ),
    (
        "FIX.4.2",
        "35=V|49=C|56=R|34=5|52=20261122-10:00:00|262=M|263=1|264=0|267=1|269=0|146=1|55=X|",
    ),
    (
        "FIXT.1.1",
        "35=A|49=C|56=R|34=1|52=20261122-10:00:00|98=0|108=30|1137=9|",
    ),
    (
        "FIXT.1.1",
        "35=8|49=C|56=R|34=6|52=20261122-10:00:00|37=1|17=E|150=F|39=2|54=1|151=0|14=5|\
         354=3|355=x|y|93=1|89=s|",
    ),
    (
        "FIXT.1.1",
        "35=3|49=C|56=R|34=7|52=20261122-10:00:00|45=4|371=54|372=D|373=5|",
    ),
];

fn frame_up(begin: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!("8={begin}\u{1}9={}\u{1}", body.len()).into_bytes();
    out.extend_from_slice(body);
    let sum = checksum(&out);
    out.extend_from_slice(format!("10={sum:03}\u{1}").as_bytes());
    out
}

fn seed(i: usize) -> (&'static str, Vec<u8>) {
    let (begin, body) = SEEDS[i % SEEDS.len()];
    (begin, body.replace('|', "\u{1}").into_bytes())
}

/// Walks a buffer the way a session does, checking every promise `next_frame` makes.
fn walk(input: &[u8]) {
    let mut buf = input;
    let mut steps = 0;
    while !buf.is_empty() {
        steps += 1;
        assert!(steps <= input.len() + 1, "no progress");
        match next_frame(buf, MAX_LEN) {
            Ok(None) => break,
            Ok(Some((frame, len))) => {
                assert!(
                    len > 0 && len <= buf.len(),
                    "frame length {len} of {}",
                    buf.len()
                );
                assert!(len <= MAX_LEN);
                // The frame is the first `len` bytes of the buffer itself.
                assert_eq!(frame.bytes.as_ptr(), buf.as_ptr());
                assert_eq!(frame.bytes.len(), len);
                assert!(inside(frame.msg_type, frame.bytes));
                assert!(inside(frame.begin_string, frame.bytes));
                for f in frame.fields().flatten() {
                    assert!(inside(f.value, frame.bytes));
                }
                for version in ApplVersion::ALL {
                    let checked = dict::validate(version, &frame);
                    validated_decode_agrees(version, &frame, checked);
                }
                let _ = frame.get(35);
                buf = &buf[len..];
            }
            Err(garbled) => {
                assert!(
                    garbled.skip > 0 && garbled.skip <= buf.len(),
                    "skip {} of {}",
                    garbled.skip,
                    buf.len()
                );
                buf = &buf[garbled.skip..];
            }
        }
    }
}

/// Decoding a NewOrderSingle in the validating pass gives what validating and then decoding
/// give (apart from data fields, which only the validator reads by their length): the same
/// order, or the same dictionary violation, or a decoding error too (with several faults in
/// one message the two may name different ones).
fn validated_decode_agrees(
    version: ApplVersion,
    frame: &Frame<'_>,
    checked: Result<(), Violation>,
) {
    let has_data = frame.fields().flatten().any(|f| {
        dict::field(version, f.tag).is_some_and(|d| matches!(d.kind, Kind::Data | Kind::XmlData))
    });
    let fused = NewOrderSingle::decode_validated(version, frame);
    match checked {
        Err(v) => assert_eq!(fused, Err(v.into())),
        Ok(()) if has_data => {}
        Ok(()) => match NewOrderSingle::decode(frame) {
            Ok(order) => assert_eq!(fused, Ok(order)),
            Err(_) => assert!(fused.is_err(), "{fused:?}"),
        },
    }
}

fn inside(part: &[u8], whole: &[u8]) -> bool {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    p >= w && p + part.len() <= w + whole.len()
}

#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize, u8),
    Truncate(usize),
    Insert(usize, u8),
    Delete(usize),
    /// Copies the field that starts at or after the first index to before the second.
    DuplicateField(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit(at, bit)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            prop_oneof![Just(1u8), Just(b'='), Just(b'0'), Just(b'8')]
        )
            .prop_map(|(at, b)| Mutation::Insert(at, b)),
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::DuplicateField(a, b)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let n = bytes.len();
    match *m {
        Mutation::FlipBit(at, bit) => bytes[at % n] ^= 1 << bit,
        Mutation::Truncate(at) => bytes.truncate(at % n),
        Mutation::Insert(at, b) => bytes.insert(at % (n + 1), b),
        Mutation::Delete(at) => {
            bytes.remove(at % n);
        }
        Mutation::DuplicateField(from, to) => {
            let starts: Vec<usize> = std::iter::once(0)
                .chain(
                    bytes
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| **b == 1)
                        .map(|(i, _)| i + 1),
                )
                .filter(|&i| i < n)
                .collect();
            let start = starts[from % starts.len()];
            let end = bytes[start..]
                .iter()
                .position(|&b| b == 1)
                .map_or(n, |p| start + p + 1);
            let field = bytes[start..end].to_vec();
            let at = starts[to % starts.len()];
            bytes.splice(at..at, field);
        }
    }
}

/// Bytes drawn mostly from the characters FIX is made of.
fn fixish_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(&b"0123456789=\x01"[..]),
            1 => prop::sample::select(&b"8=FIX.4T19035ADW|-:"[..]),
            1 => any::<u8>(),
        ],
        0..600,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        walk(&bytes);
    }

    #[test]
    fn fix_like_bytes(bytes in fixish_bytes(), begin in 0usize..3) {
        walk(&bytes);
        // The same bytes as a well-framed body, so they reach the field walk and validation.
        let begin = ["FIX.4.2", "FIX.4.4", "FIXT.1.1"][begin];
        let mut body = b"35=D\x01".to_vec();
        body.extend_from_slice(&bytes);
        body.push(1);
        walk(&frame_up(begin, &body));
    }

    #[test]
    fn mutated_messages(
        which in 0usize..SEEDS.len(),
        mutations in prop::collection::vec(mutation(), 1..6),
        reframe in any::<bool>(),
    ) {
        let (begin, body) = seed(which);
        if reframe {
            // Mutate the body and give it a right BodyLength and CheckSum.
            let mut body = body;
            for m in &mutations {
                apply(&mut body, m);
            }
            walk(&frame_up(begin, &body));
        } else {
            let mut whole = frame_up(begin, &body);
            for m in &mutations {
                apply(&mut whole, m);
            }
            // Followed by a good message: the walk must get past the damage (a long enough
            // wrong BodyLength may take the good message with it, so it is not required).
            let good = frame_up(begin, &body);
            whole.extend_from_slice(&good);
            walk(&whole);
        }
    }

    #[test]
    fn streams_of_messages(picks in prop::collection::vec(0usize..SEEDS.len(), 1..8)) {
        // Good messages back to back are all found and all validate.
        let mut stream = Vec::new();
        for &i in &picks {
            let (begin, body) = seed(i);
            stream.extend_from_slice(&frame_up(begin, &body));
        }
        let mut buf = &stream[..];
        let mut found = 0;
        while let Ok(Some((frame, len))) = next_frame(buf, MAX_LEN) {
            let version = appl_version(frame.begin_string);
            prop_assert_eq!(dict::validate(version, &frame), Ok(()), "{}", frame.display());
            buf = &buf[len..];
            found += 1;
        }
        prop_assert_eq!(found, picks.len());
        prop_assert!(buf.is_empty());
    }
}

/// The application version of a seed's BeginString (FIXT.1.1's seeds are FIX 5.0SP2).
fn appl_version(begin_string: &[u8]) -> ApplVersion {
    let version = Version::from_begin_string(begin_string).unwrap();
    version.appl_version().unwrap_or(ApplVersion::Fix50Sp2)
}

/// The mutations above are worth something only if re-framed ones get past the framing into
/// the dictionary: check, with a fixed seed, that they draw out many different reject reasons.
#[test]
fn mutations_reach_the_validator() {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as usize
    };
    let mut reasons = std::collections::BTreeSet::new();
    let mut passed = 0;
    for _ in 0..4000 {
        let (begin, mut body) = seed(rand());
        let m = match rand() % 5 {
            0 => Mutation::FlipBit(rand(), (rand() % 8) as u8),
            1 => Mutation::Truncate(rand()),
            2 => Mutation::Insert(rand(), [1, b'=', b'0', b'8'][rand() % 4]),
            3 => Mutation::Delete(rand()),
            _ => Mutation::DuplicateField(rand(), rand()),
        };
        apply(&mut body, &m);
        let bytes = frame_up(begin, &body);
        let Ok(Some((frame, _))) = next_frame(&bytes, MAX_LEN) else {
            continue;
        };
        let version = appl_version(frame.begin_string);
        match dict::validate(version, &frame) {
            Ok(()) => passed += 1,
            Err(v) => {
                reasons.insert(v.reason);
            }
        }
    }
    assert!(passed > 100, "only {passed} mutated messages passed");
    for expected in [0, 1, 2, 4, 5, 6, 11, 13, 14, 15, 16] {
        assert!(
            reasons.contains(&expected),
            "reason {expected} never seen: {reasons:?}"
        );
    }
}
