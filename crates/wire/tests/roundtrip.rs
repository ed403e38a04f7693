//! Properties of the codec over generated messages and bytes: decoding never panics, every
//! message round-trips, a partial frame asks for more bytes, frames in a row decode in order.

use proptest::prelude::*;
use rialto_core::{
    Balance, CancelReason, CurrencyTotals, Level, Name, OpenOrder, OrderExtras, OrderType, Phase,
    Position, Priority, Reason, Side, Stp, SymbolId, SymbolKind, SymbolSpec, SymbolStatus, Tif,
    UserReport,
};
use rialto_wire::{
    ClientMsg, ErrorCode, Liquidity, Margin, NewOrder, OrderState, RequestKind, Secret, ServerMsg,
    decode_client, decode_server, encode_client, encode_server,
};

fn name() -> impl Strategy<Value = Name> {
    // Up to 11 characters of at most 2 bytes: always within 23 bytes, sometimes multi-byte.
    "[A-Za-z0-9é/-]{1,11}".prop_map(|s| Name::new(&s).unwrap())
}

fn secret() -> impl Strategy<Value = Secret> {
    prop::collection::vec(any::<u8>(), 1..=64).prop_map(|b| Secret::new(&b).unwrap())
}

fn symbol() -> impl Strategy<Value = SymbolId> {
    any::<u32>().prop_map(SymbolId)
}

/// A symbol's kind: spot or a future with any margins and mark.
fn kind() -> impl Strategy<Value = SymbolKind> {
    prop_oneof![
        Just(SymbolKind::Spot),
        any::<[i64; 3]>().prop_map(|n| SymbolKind::Future {
            initial_margin: n[0],
            maintenance_margin: n[1],
            mark_price: n[2],
        }),
    ]
}

/// A spec as a server lists it (its kind is known); band and day end are often the defaults,
/// so both layouts of a spec (with and without its extension) come up.
fn spec() -> impl Strategy<Value = SymbolSpec> {
    spec_with(kind().prop_map(Some))
}

/// A spec as a client may send it: its kind may be a type code the server does not know.
fn client_spec() -> impl Strategy<Value = SymbolSpec> {
    spec_with(prop_oneof![3 => kind().prop_map(Some), 1 => Just(None)])
}

fn spec_with(kind: impl Strategy<Value = Option<SymbolKind>>) -> impl Strategy<Value = SymbolSpec> {
    (
        (name(), name(), name()),
        any::<[i64; 4]>(),
        prop_oneof![Just([0i64; 2]), any::<[i64; 2]>()],
        kind,
    )
        .prop_map(|((symbol, base, quote), n, extra, kind)| SymbolSpec {
            symbol,
            base,
            quote,
            base_scale: n[0],
            quote_scale: n[1],
            maker_fee: n[2],
            taker_fee: n[3],
            band_bps: extra[0],
            day_end: extra[1],
            kind,
        })
}

/// A code that is sometimes known, sometimes not: unknown codes decode to `None`.
fn code_of<T: Copy + std::fmt::Debug + 'static>(
    from_code: fn(u8) -> Option<T>,
) -> impl Strategy<Value = Option<T>> {
    prop_oneof![0u8..4, any::<u8>()].prop_map(from_code)
}

fn new_order() -> impl Strategy<Value = NewOrder> {
    (
        any::<i64>(),
        symbol(),
        code_of(Side::from_code),
        code_of(OrderType::from_code),
        code_of(Tif::from_code),
        code_of(Stp::from_code),
        any::<bool>(),
        any::<Option<i64>>(),
        any::<i64>(),
        any::<[Option<i64>; 3]>(),
    )
        .prop_map(
            |(order, symbol, side, order_type, tif, stp, post_only, price, qty, extras)| NewOrder {
                order,
                symbol,
                side,
                order_type,
                tif,
                stp,
                post_only,
                price,
                qty,
                extras: OrderExtras::with_fields(extras[0], extras[1], extras[2]),
            },
        )
}

fn client_msg() -> BoxedStrategy<ClientMsg> {
    let sessions = prop_oneof![
        (any::<i64>(), secret()).prop_map(|(user, secret)| ClientMsg::Login { user, secret }),
        secret().prop_map(|secret| ClientMsg::AdminLogin { secret }),
        any::<u64>().prop_map(|nonce| ClientMsg::Heartbeat { nonce }),
        new_order().prop_map(ClientMsg::NewOrder),
        any::<i64>().prop_map(|order| ClientMsg::Cancel { order }),
        any::<(i64, i64)>().prop_map(|(order, price)| ClientMsg::Move { order, price }),
        any::<(i64, i64)>().prop_map(|(order, qty)| ClientMsg::Reduce { order, qty }),
        (
            any::<i64>(),
            prop::option::of(any::<i64>()),
            prop::option::of(any::<i64>()),
            prop::option::of(any::<i64>())
        )
            .prop_map(|(order, price, qty, stop_price)| ClientMsg::Amend {
                order,
                price,
                qty,
                stop_price
            }),
        // u32::MAX is the wire's "every symbol", so Some(SymbolId(u32::MAX)) reads back as None.
        prop::option::of((0..u32::MAX).prop_map(SymbolId))
            .prop_map(|symbol| ClientMsg::MassCancel { symbol }),
    ];
    let queries = prop_oneof![
        any::<u64>().prop_map(|request| ClientMsg::ListSymbols { request }),
        any::<u64>().prop_map(|request| ClientMsg::MyReport { request }),
        any::<u64>().prop_map(|request| ClientMsg::MyReportExt { request }),
        any::<(u64, i64)>().prop_map(|(request, order)| ClientMsg::OrderStatus { request, order }),
        (any::<u64>(), symbol(), any::<u32>()).prop_map(|(request, symbol, depth)| {
            ClientMsg::Book {
                request,
                symbol,
                depth,
            }
        }),
        (any::<u64>(), client_spec())
            .prop_map(|(request, spec)| ClientMsg::AddSymbol { request, spec }),
        (any::<u64>(), symbol(), any::<i64>()).prop_map(|(request, symbol, price)| {
            ClientMsg::SetMarkPrice {
                request,
                symbol,
                price,
            }
        }),
        (any::<u64>(), name(), any::<(i64, i64)>()).prop_map(
            |(request, currency, (amount, tx))| ClientMsg::FundInsurance {
                request,
                currency,
                amount,
                tx,
            }
        ),
        any::<(u64, i64)>().prop_map(|(request, user)| ClientMsg::AddUser { request, user }),
        (any::<(u64, i64)>(), name(), any::<(i64, i64)>()).prop_map(
            |((request, user), currency, (amount, tx))| ClientMsg::AdjustBalance {
                request,
                user,
                currency,
                amount,
                tx,
            }
        ),
        any::<u64>().prop_map(|request| ClientMsg::TakeSnapshot { request }),
        any::<(u64, i64)>().prop_map(|(request, user)| ClientMsg::UserReport { request, user }),
        any::<(u64, i64)>().prop_map(|(request, user)| ClientMsg::UserReportExt { request, user }),
        any::<u64>().prop_map(|request| ClientMsg::VenueReport { request }),
        any::<u64>().prop_map(|request| ClientMsg::ListUsers { request }),
        any::<(u64, i64)>()
            .prop_map(|(request, window_ns)| ClientMsg::SetOrderIdWindow { request, window_ns }),
        any::<u64>().prop_map(|request| ClientMsg::VenueSettings { request }),
        (any::<u64>(), symbol(), code_of(Phase::from_code)).prop_map(|(request, symbol, phase)| {
            ClientMsg::SetPhase {
                request,
                symbol,
                phase,
            }
        }),
        (any::<u64>(), symbol(), any::<i64>()).prop_map(|(request, symbol, band_bps)| {
            ClientMsg::SetBand {
                request,
                symbol,
                band_bps,
            }
        }),
        (any::<u64>(), symbol(), any::<i64>()).prop_map(|(request, symbol, price)| {
            ClientMsg::SetRefPrice {
                request,
                symbol,
                price,
            }
        }),
        any::<(u64, i64)>().prop_map(|(request, user)| ClientMsg::SuspendUser { request, user }),
        any::<(u64, i64)>().prop_map(|(request, user)| ClientMsg::ResumeUser { request, user }),
    ];
    prop_oneof![sessions, queries].boxed()
}

fn pick<T: Copy + std::fmt::Debug + 'static>(all: &'static [T]) -> impl Strategy<Value = T> {
    prop::sample::select(all)
}

fn report() -> impl Strategy<Value = UserReport> {
    let balance = (name(), any::<(i64, i64)>())
        .prop_map(|(c, (available, held))| (c, Balance { available, held }));
    let order = (name(), any::<i64>(), pick(Side::ALL), any::<(i64, i64)>()).prop_map(
        |(symbol, order, side, (price, remaining))| OpenOrder {
            symbol,
            order,
            side,
            order_type: OrderType::Limit,
            tif: Tif::Gtc,
            price,
            stop_price: 0,
            remaining,
            shown: remaining,
            filled: 0,
            expire_ts: 0,
        },
    );
    (
        any::<i64>(),
        prop::collection::vec(balance, 0..5),
        prop::collection::vec(order, 0..5),
        positions(),
    )
        .prop_map(|(user, balances, orders, positions)| UserReport {
            user,
            suspended: false,
            balances,
            orders,
            positions,
            margins: Vec::new(),
        })
}

/// A report whose open orders have any value in every field, as a ReportExt carries them.
fn report_ext() -> impl Strategy<Value = UserReport> {
    let balance = (name(), any::<(i64, i64)>())
        .prop_map(|(c, (available, held))| (c, Balance { available, held }));
    let order = (
        (name(), any::<i64>(), pick(Side::ALL)),
        (pick(OrderType::ALL), pick(Tif::ALL)),
        any::<(i64, i64, i64)>(),
        any::<(i64, i64, i64)>(),
    )
        .prop_map(
            |(
                (symbol, order, side),
                (order_type, tif),
                (price, stop_price, remaining),
                (shown, filled, expire_ts),
            )| OpenOrder {
                symbol,
                order,
                side,
                order_type,
                tif,
                price,
                stop_price,
                remaining,
                shown,
                filled,
                expire_ts,
            },
        );
    (
        any::<i64>(),
        prop::collection::vec(balance, 0..5),
        prop::collection::vec(order, 0..5),
        positions(),
    )
        .prop_map(|(user, balances, orders, positions)| UserReport {
            user,
            suspended: false,
            balances,
            orders,
            positions,
            margins: Vec::new(),
        })
}

/// Futures positions, often none (a spot-only user's report has no futures part).
fn positions() -> impl Strategy<Value = Vec<Position>> {
    let position = (name(), any::<(i64, i64)>()).prop_map(|(symbol, (lots, cost))| Position {
        symbol,
        lots,
        cost,
    });
    prop_oneof![Just(Vec::new()), prop::collection::vec(position, 0..4)]
}

fn margins() -> impl Strategy<Value = Vec<Margin>> {
    let margin = (name(), any::<[i64; 3]>()).prop_map(|(currency, n)| Margin {
        currency,
        equity: n[0],
        initial: n[1],
        maintenance: n[2],
    });
    prop_oneof![Just(Vec::new()), prop::collection::vec(margin, 0..3)]
}

fn levels() -> impl Strategy<Value = Vec<Level>> {
    prop::collection::vec(
        any::<(i64, i64)>().prop_map(|(price, qty)| Level { price, qty }),
        0..6,
    )
}

fn server_msg() -> BoxedStrategy<ServerMsg> {
    let head = (any::<u64>(), any::<i64>(), any::<i64>());
    let stream = prop_oneof![
        any::<(i64, u64)>()
            .prop_map(|(user, last_seq)| ServerMsg::LoginAccepted { user, last_seq }),
        (pick(ErrorCode::ALL), "\\PC{0,40}")
            .prop_map(|(code, message)| ServerMsg::Error { code, message }),
        any::<u64>().prop_map(|nonce| ServerMsg::Heartbeat { nonce }),
        (head, pick(RequestKind::ALL)).prop_map(|((seq, ts_ns, order), kind)| {
            ServerMsg::Accepted {
                seq,
                ts_ns,
                order,
                kind,
            }
        }),
        (head, pick(RequestKind::ALL), pick(Reason::ALL)).prop_map(
            |((seq, ts_ns, order), kind, reason)| ServerMsg::Rejected {
                seq,
                ts_ns,
                order,
                kind,
                reason,
            }
        ),
        (
            head,
            symbol(),
            pick(Side::ALL),
            any::<[i64; 3]>(),
            pick(Liquidity::ALL)
        )
            .prop_map(|((seq, ts_ns, order), symbol, side, n, liquidity)| {
                ServerMsg::Trade {
                    seq,
                    ts_ns,
                    order,
                    symbol,
                    side,
                    price: n[0],
                    qty: n[1],
                    fee: n[2],
                    liquidity,
                }
            }),
        (
            head,
            symbol(),
            pick(Side::ALL),
            any::<i64>(),
            pick(CancelReason::ALL)
        )
            .prop_map(|((seq, ts_ns, order), symbol, side, qty, reason)| {
                ServerMsg::Cancelled {
                    seq,
                    ts_ns,
                    order,
                    symbol,
                    side,
                    qty,
                    reason,
                }
            }),
        (
            head,
            symbol(),
            pick(Side::ALL),
            any::<[i64; 3]>(),
            pick(Priority::ALL)
        )
            .prop_map(|((seq, ts_ns, order), symbol, side, n, priority)| {
                ServerMsg::Amended {
                    seq,
                    ts_ns,
                    order,
                    symbol,
                    side,
                    price: n[0],
                    stop_price: n[1],
                    remaining: n[2],
                    priority,
                }
            }),
        (head, symbol(), pick(Side::ALL), any::<i64>()).prop_map(
            |((seq, ts_ns, order), symbol, side, stop_price)| ServerMsg::Triggered {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                stop_price,
            }
        ),
        (head, symbol(), pick(Phase::ALL)).prop_map(|((seq, ts_ns, _), symbol, phase)| {
            ServerMsg::PhaseChanged {
                seq,
                ts_ns,
                symbol,
                phase,
            }
        }),
        (head, symbol(), any::<[i64; 3]>()).prop_map(|((seq, ts_ns, _), symbol, n)| {
            ServerMsg::Auction {
                seq,
                ts_ns,
                symbol,
                price: n[0],
                qty: n[1],
                imbalance: n[2],
            }
        }),
        (head, name(), any::<[i64; 3]>()).prop_map(|((seq, ts_ns, _), currency, n)| {
            ServerMsg::Liquidated {
                seq,
                ts_ns,
                currency,
                equity: n[0],
                maintenance: n[1],
                shortfall: n[2],
            }
        }),
    ];
    // Insurance and position cost are often 0, so both layouts come up.
    let futures = prop_oneof![Just((0i64, 0i128)), any::<(i64, i128)>()];
    let totals = (name(), any::<[i64; 5]>(), futures).prop_map(
        |(currency, n, (insurance, position_cost))| CurrencyTotals {
            currency,
            deposits: n[0],
            withdrawals: n[1],
            available: n[2],
            held: n[3],
            fees: n[4],
            insurance,
            position_cost,
        },
    );
    let replies = prop_oneof![
        (
            any::<(u64, u64, i64)>(),
            prop::collection::vec(
                (
                    symbol(),
                    pick(Phase::ALL),
                    any::<[i64; 3]>(),
                    prop::option::weighted(0.3, any::<i64>())
                )
                    .prop_map(|(id, phase, n, mark)| {
                        let status = SymbolStatus {
                            phase,
                            last: n[0],
                            reference: n[1],
                            band_bps: n[2],
                            future: mark.is_some(),
                            mark: mark.unwrap_or(0),
                        };
                        (id, status)
                    }),
                0..4
            )
        )
            .prop_map(|((request, seq, order_id_window_ns), symbols)| {
                ServerMsg::VenueSettings {
                    request,
                    seq,
                    order_id_window_ns,
                    symbols,
                }
            }),
        (
            any::<u64>(),
            prop::collection::vec((symbol(), spec()), 0..4)
        )
            .prop_map(|(request, symbols)| ServerMsg::SymbolList { request, symbols }),
        (any::<u64>(), any::<u64>(), report(), margins()).prop_map(
            |(request, seq, report, margins)| ServerMsg::Report {
                request,
                seq,
                report,
                margins,
            }
        ),
        (any::<u64>(), any::<u64>(), report_ext(), margins()).prop_map(
            |(request, seq, report, margins)| ServerMsg::ReportExt {
                request,
                seq,
                report,
                margins,
            }
        ),
        (any::<(u64, u64, i64, i64)>(), pick(OrderState::ALL)).prop_map(
            |((request, seq, order, remaining), state)| ServerMsg::OrderStatus {
                request,
                seq,
                order,
                state,
                remaining,
            }
        ),
        (any::<u64>(), prop::collection::vec(totals, 0..4))
            .prop_map(|(request, totals)| ServerMsg::VenueReport { request, totals }),
        (any::<u64>(), prop::collection::vec(any::<i64>(), 0..6))
            .prop_map(|(request, users)| ServerMsg::UserList { request, users }),
        (any::<(u64, u64)>(), symbol(), levels(), levels()).prop_map(
            |((request, seq), symbol, bids, asks)| ServerMsg::Book {
                request,
                seq,
                symbol,
                bids,
                asks,
            }
        ),
        (any::<(u64, u64)>(), prop::option::of(pick(Reason::ALL))).prop_map(
            |((request, seq), reason)| ServerMsg::AdminResult {
                request,
                seq,
                result: reason.map_or(Ok(()), Err),
            }
        ),
        (any::<(u64, u64, i64)>(), secret()).prop_map(|((request, seq, user), secret)| {
            ServerMsg::UserAdded {
                request,
                seq,
                user,
                secret,
            }
        }),
        (any::<(u64, u64)>(), any::<[u8; 32]>()).prop_map(|((request, seq), state_hash)| {
            ServerMsg::SnapshotTaken {
                request,
                seq,
                state_hash,
            }
        }),
    ];
    prop_oneof![stream, replies].boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_client(&bytes);
        let _ = decode_server(&bytes);
    }

    /// Arbitrary bodies behind a plausible header reach the body decoders, which random bytes
    /// alone rarely do.
    #[test]
    fn arbitrary_bodies_never_panic(
        frame_type in any::<u8>(),
        body in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut frame = ((body.len() + 2) as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&[1, frame_type]);
        frame.extend_from_slice(&body);
        for result in [decode_client(&frame).map(|m| m.map(|(_, n)| n)),
                       decode_server(&frame).map(|m| m.map(|(_, n)| n))] {
            match result {
                Ok(Some(n)) => prop_assert_eq!(n, frame.len()),
                Ok(None) => prop_assert!(false, "a whole frame asked for more bytes"),
                Err(e) => prop_assert_eq!(e.frame_len(), Some(frame.len())),
            }
        }
    }

    #[test]
    fn client_messages_round_trip(msg in client_msg()) {
        let mut out = vec![0xAA; 3]; // encoding appends
        encode_client(&msg, &mut out);
        let frame = &out[3..];
        let (decoded, n) = decode_client(frame).unwrap().unwrap();
        prop_assert_eq!(decoded, msg);
        prop_assert_eq!(n, frame.len());
        prop_assert!(n - 4 <= rialto_wire::MAX_CLIENT_FRAME);
        for cut in 0..frame.len() {
            prop_assert_eq!(decode_client(&frame[..cut]).unwrap(), None);
        }
    }

    #[test]
    fn server_messages_round_trip(msg in server_msg()) {
        let mut out = Vec::new();
        encode_server(&msg, &mut out);
        let (decoded, n) = decode_server(&out).unwrap().unwrap();
        prop_assert_eq!(decoded, msg);
        prop_assert_eq!(n, out.len());
        for cut in 0..out.len() {
            prop_assert_eq!(decode_server(&out[..cut]).unwrap(), None);
        }
    }

    #[test]
    fn frames_in_a_row_decode_in_order(
        clients in prop::collection::vec(client_msg(), 0..8),
        servers in prop::collection::vec(server_msg(), 0..8),
    ) {
        let mut out = Vec::new();
        for m in &clients {
            encode_client(m, &mut out);
        }
        let mut at = 0;
        for m in &clients {
            let (decoded, n) = decode_client(&out[at..]).unwrap().unwrap();
            prop_assert_eq!(&decoded, m);
            at += n;
        }
        prop_assert_eq!(at, out.len());

        out.clear();
        for m in &servers {
            encode_server(m, &mut out);
        }
        let mut at = 0;
        for m in &servers {
            let (decoded, n) = decode_server(&out[at..]).unwrap().unwrap();
            prop_assert_eq!(&decoded, m);
            at += n;
        }
        prop_assert_eq!(at, out.len());
    }
}
