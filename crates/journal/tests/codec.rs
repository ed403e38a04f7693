//! The command codec: every variant round-trips; arbitrary bytes never panic; encodings are
//! canonical (anything that decodes re-encodes to the same bytes).

use proptest::prelude::*;
use rialto_core::{
    AmendOrder, Command, Name, OrderExtras, OrderType, Phase, PlaceOrder, Side, Stp, SymbolId,
    SymbolKind, SymbolSpec, Tif,
};
use rialto_journal::{MAX_COMMAND_BYTES, decode_command, encode_command};

fn name() -> impl Strategy<Value = Name> {
    // 1 to 23 bytes of UTF-8, multi-byte characters included.
    "[A-Za-z0-9\\-é€]{1,7}".prop_filter_map("1..=23 bytes", |s| Name::new(&s))
}

fn opt<T: Copy + std::fmt::Debug + 'static>(all: &'static [T]) -> impl Strategy<Value = Option<T>> {
    prop_oneof![Just(None), proptest::sample::select(all).prop_map(Some)]
}

/// Spot (tags 1 and 16), a future, or an unknown type (both tag 22).
fn kind() -> impl Strategy<Value = Option<SymbolKind>> {
    prop_oneof![
        2 => Just(SymbolSpec::SPOT),
        1 => Just(None),
        1 => any::<[i64; 3]>().prop_map(|m| Some(SymbolKind::Future {
            initial_margin: m[0],
            maintenance_margin: m[1],
            mark_price: m[2],
        })),
    ]
}

fn command() -> impl Strategy<Value = Command> {
    let i = any::<i64>;
    prop_oneof![
        (
            name(),
            name(),
            name(),
            i(),
            i(),
            i(),
            i(),
            (i(), i(), kind())
        )
            .prop_map(
                |(symbol, base, quote, a, b, c, d, (band_bps, day_end, kind))| {
                    Command::AddSymbol(Box::new(SymbolSpec {
                        symbol,
                        base,
                        quote,
                        base_scale: a,
                        quote_scale: b,
                        maker_fee: c,
                        taker_fee: d,
                        // Both kinds: zero (tag 1) and not (tag 16).
                        band_bps: band_bps % 3,
                        day_end,
                        kind,
                    }))
                }
            ),
        (any::<u32>(), i()).prop_map(|(s, price)| Command::SetMarkPrice {
            symbol: SymbolId(s),
            price
        }),
        (name(), i(), i()).prop_map(|(currency, amount, tx)| Command::FundInsurance {
            currency,
            amount,
            tx
        }),
        i().prop_map(|user| Command::AddUser { user }),
        (i(), name(), i(), i()).prop_map(|(user, currency, amount, tx)| Command::AdjustBalance {
            user,
            currency,
            amount,
            tx
        }),
        (
            (i(), i(), any::<u32>(), opt(Side::ALL), opt(OrderType::ALL)),
            (
                opt(Tif::ALL),
                any::<Option<i64>>(),
                i(),
                any::<bool>(),
                opt(Stp::ALL),
            ),
            any::<(Option<i64>, Option<i64>, Option<i64>)>(),
        )
            .prop_map(
                |(
                    (user, order, symbol, side, order_type),
                    (tif, price, qty, post_only, stp),
                    (stop_price, display_qty, expire_ts),
                )| {
                    Command::Place(PlaceOrder {
                        user,
                        order,
                        symbol: SymbolId(symbol),
                        side,
                        order_type,
                        tif,
                        price,
                        qty,
                        post_only,
                        stp,
                        extras: OrderExtras::with_fields(stop_price, display_qty, expire_ts),
                    })
                }
            ),
        (i(), i()).prop_map(|(user, order)| Command::Cancel { user, order }),
        (i(), i(), i()).prop_map(|(user, order, price)| Command::Move { user, order, price }),
        (i(), i(), i()).prop_map(|(user, order, qty)| Command::Reduce { user, order, qty }),
        (any::<u32>(), i()).prop_map(|(s, depth)| Command::Book {
            symbol: SymbolId(s),
            depth
        }),
        i().prop_map(|user| Command::UserReport { user }),
        Just(Command::VenueReport),
        (i(), any::<Option<u32>>()).prop_map(|(user, s)| Command::MassCancel {
            user,
            symbol: s.map(SymbolId),
        }),
        Just(Command::Tick),
        (any::<u32>(), opt(Phase::ALL)).prop_map(|(s, phase)| Command::SetPhase {
            symbol: SymbolId(s),
            phase
        }),
        (any::<u32>(), i()).prop_map(|(s, band_bps)| Command::SetBand {
            symbol: SymbolId(s),
            band_bps
        }),
        (any::<u32>(), i()).prop_map(|(s, price)| Command::SetRefPrice {
            symbol: SymbolId(s),
            price
        }),
        i().prop_map(|user| Command::SuspendUser { user }),
        i().prop_map(|user| Command::ResumeUser { user }),
        i().prop_map(|window| Command::SetOrderIdWindow { window }),
        (
            i(),
            i(),
            any::<Option<i64>>(),
            any::<Option<i64>>(),
            any::<Option<i64>>()
        )
            .prop_map(|(user, order, price, qty, stop)| Command::Amend(
                AmendOrder::with_fields(user, order, price, qty, stop)
            )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_command_round_trips(cmd in command()) {
        let mut buf = Vec::new();
        encode_command(&cmd, &mut buf);
        prop_assert!(buf.len() <= MAX_COMMAND_BYTES);
        prop_assert_eq!(decode_command(&buf).unwrap(), cmd);
        // A cut or an extra byte is refused, not misread.
        prop_assert!(decode_command(&buf[..buf.len() - 1]).is_err());
        buf.push(0);
        prop_assert!(decode_command(&buf).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        if let Ok(cmd) = decode_command(&bytes) {
            let mut again = Vec::new();
            encode_command(&cmd, &mut again);
            prop_assert_eq!(again, bytes);
        }
    }

    #[test]
    fn mutated_encodings_never_panic(cmd in command(), at in any::<usize>(), byte in any::<u8>()) {
        let mut buf = Vec::new();
        encode_command(&cmd, &mut buf);
        let at = at % buf.len();
        buf[at] = byte;
        if let Ok(decoded) = decode_command(&buf) {
            let mut again = Vec::new();
            encode_command(&decoded, &mut again);
            prop_assert_eq!(again, buf);
        }
    }
}

#[test]
fn the_largest_command_fits() {
    let long = Name::new(&"X".repeat(Name::MAX_LEN)).unwrap();
    let cmd = Command::AddSymbol(Box::new(SymbolSpec {
        symbol: long,
        base: long,
        quote: long,
        base_scale: i64::MAX,
        quote_scale: i64::MIN,
        maker_fee: -1,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    }));
    let mut buf = Vec::new();
    encode_command(&cmd, &mut buf);
    assert_eq!(buf.len(), 105);
    assert_eq!(decode_command(&buf).unwrap(), cmd);
    // The longest: a future's, with its band, day end, margins and mark.
    let Command::AddSymbol(mut spec) = cmd else {
        unreachable!()
    };
    spec.kind = Some(SymbolKind::Future {
        initial_margin: 1,
        maintenance_margin: 1,
        mark_price: 1,
    });
    let cmd = Command::AddSymbol(spec);
    buf.clear();
    encode_command(&cmd, &mut buf);
    assert_eq!(buf.len(), 146);
    assert!(buf.len() <= MAX_COMMAND_BYTES);
    assert_eq!(decode_command(&buf).unwrap(), cmd);
}

#[test]
fn bad_bytes_say_where_and_what() {
    let err = decode_command(&[42]).unwrap_err().to_string();
    assert!(err.contains("unknown command tag 42"), "{err}");
    let mut buf = Vec::new();
    encode_command(
        &Command::Place(PlaceOrder::limit(1, 2, SymbolId(0), Side::Buy, 100, 5)),
        &mut buf,
    );
    buf[21] = 7; // the side
    let err = decode_command(&buf).unwrap_err().to_string();
    assert!(
        err.contains("byte 21") && err.contains("side: unknown code 7"),
        "{err}"
    );
    assert!(decode_command(&[]).is_err());
}
