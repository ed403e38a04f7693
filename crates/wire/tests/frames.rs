//! Exact bytes and every way a frame can be wrong.

use rialto_core::{
    Balance, CurrencyTotals, Level, Name, OpenOrder, OrderType, Phase, Position, Reason, Side, Stp,
    SymbolId, SymbolKind, SymbolSpec, SymbolStatus, Tif, UserReport,
};
use rialto_wire::{
    ClientMsg, ErrorCode, MAX_BOOK_LEVELS, MAX_CLIENT_FRAME, MAX_ERROR_MESSAGE,
    MAX_REPORT_BALANCES, MAX_REPORT_EXT_ORDERS, MAX_REPORT_MARGINS, MAX_REPORT_ORDERS,
    MAX_REPORT_POSITIONS, MAX_SERVER_FRAME, MAX_SYMBOL_LIST_ITEMS, MAX_USER_LIST_ITEMS,
    MAX_VENUE_CURRENCIES, Margin, NewOrder, Secret, ServerMsg, WireError, decode_client,
    decode_server, encode_client, encode_server,
};

fn client_frame(msg: &ClientMsg) -> Vec<u8> {
    let mut out = Vec::new();
    encode_client(msg, &mut out);
    out
}

fn server_frame(msg: &ServerMsg) -> Vec<u8> {
    let mut out = Vec::new();
    encode_server(msg, &mut out);
    out
}

/// A frame with the given type and body, length computed.
fn raw(frame_type: u8, body: &[u8]) -> Vec<u8> {
    let mut out = ((body.len() + 2) as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&[1, frame_type]);
    out.extend_from_slice(body);
    out
}

fn malformed(field: &'static str, frame: &[u8]) -> WireError {
    WireError::Malformed {
        field,
        frame_len: frame.len(),
    }
}

fn limit_order() -> NewOrder {
    NewOrder::limit(7, SymbolId(2), Side::Sell, 100, 5)
}

#[test]
fn heartbeat_bytes_are_as_documented() {
    let frame = client_frame(&ClientMsg::Heartbeat { nonce: 0x0102 });
    assert_eq!(frame, [10, 0, 0, 0, 1, 0x03, 2, 1, 0, 0, 0, 0, 0, 0]);
    let frame = server_frame(&ServerMsg::Heartbeat { nonce: 0x0102 });
    assert_eq!(frame, [10, 0, 0, 0, 1, 0x83, 2, 1, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn new_order_bytes_are_as_documented() {
    let order = NewOrder {
        post_only: true,
        ..limit_order()
    };
    let frame = client_frame(&ClientMsg::NewOrder(order));
    let mut want = vec![35, 0, 0, 0, 1, 0x10];
    want.extend_from_slice(&7i64.to_le_bytes());
    want.extend_from_slice(&2u32.to_le_bytes());
    want.extend_from_slice(&[1, 0, 0, 0, 0b11]); // sell, limit, gtc, cancel_taker, flags
    want.extend_from_slice(&100i64.to_le_bytes());
    want.extend_from_slice(&5i64.to_le_bytes());
    assert_eq!(frame, want);
}

#[test]
fn mass_cancel_of_every_symbol_is_u32_max() {
    let frame = client_frame(&ClientMsg::MassCancel { symbol: None });
    assert_eq!(frame, [6, 0, 0, 0, 1, 0x14, 0xff, 0xff, 0xff, 0xff]);
}

#[test]
fn an_order_with_extras_is_a_new_order_ext_and_one_without_a_new_order() {
    let plain = limit_order();
    assert_eq!(client_frame(&ClientMsg::NewOrder(plain))[5], 0x10);
    let stop = NewOrder {
        order_type: Some(rialto_core::OrderType::StopLimit),
        extras: rialto_core::OrderExtras::NONE
            .with_stop_price(90)
            .with_expire_ts(7),
        ..plain
    };
    let frame = client_frame(&ClientMsg::NewOrder(stop));
    let mut want = client_frame(&ClientMsg::NewOrder(NewOrder {
        extras: rialto_core::OrderExtras::NONE,
        ..stop
    }));
    want[0] += 25; // the extras
    want[5] = 0x16;
    want.push(0b101); // stop price and expiry present, display qty absent
    for n in [90i64, 0, 7] {
        want.extend_from_slice(&n.to_le_bytes());
    }
    assert_eq!(frame, want);
    assert_eq!(frame[19], 3, "order type stop_limit");
    assert_eq!(
        decode_client(&frame),
        Ok(Some((ClientMsg::NewOrder(stop), frame.len())))
    );
    // An absent extra must be 0; unknown flag bits are malformed.
    let mut bad = frame.clone();
    bad[6 + 42] = 1;
    assert_eq!(decode_client(&bad), Err(malformed("display_qty", &bad)));
    let mut bad = frame.clone();
    bad[6 + 33] |= 0x08;
    assert_eq!(decode_client(&bad), Err(malformed("ext_flags", &bad)));
}

#[test]
fn amend_bytes_are_as_documented() {
    let amend = ClientMsg::Amend {
        order: 7,
        price: Some(100),
        qty: None,
        stop_price: None,
    };
    let frame = client_frame(&amend);
    let mut want = vec![35, 0, 0, 0, 1, 0x15];
    want.extend_from_slice(&7i64.to_le_bytes());
    want.push(0b001); // price present; qty and stop_price absent
    want.extend_from_slice(&100i64.to_le_bytes());
    want.extend_from_slice(&[0; 16]);
    assert_eq!(frame, want);
    assert_eq!(decode_client(&frame), Ok(Some((amend, frame.len()))));
}

#[test]
fn an_absent_amend_field_must_be_written_as_zero_and_unknown_bits_are_malformed() {
    let amend = ClientMsg::Amend {
        order: 7,
        price: None,
        qty: Some(3),
        stop_price: None,
    };
    let good = client_frame(&amend);
    let mut frame = good.clone();
    frame[6 + 9] = 1; // low byte of the absent price
    assert_eq!(decode_client(&frame), Err(malformed("price", &frame)));
    let mut frame = good.clone();
    frame[6 + 25] = 1; // low byte of the absent stop price
    assert_eq!(decode_client(&frame), Err(malformed("stop_price", &frame)));
    for bit in 3..8 {
        let mut frame = good.clone();
        frame[6 + 8] |= 1 << bit;
        assert_eq!(decode_client(&frame), Err(malformed("flags", &frame)));
    }
}

#[test]
fn amended_bytes_are_as_documented() {
    let msg = ServerMsg::Amended {
        seq: 9,
        ts_ns: 10,
        order: 7,
        symbol: SymbolId(2),
        side: Side::Buy,
        price: 100,
        stop_price: 0,
        remaining: 4,
        priority: rialto_core::Priority::Lost,
    };
    let frame = server_frame(&msg);
    let mut want = vec![56, 0, 0, 0, 1, 0x88];
    for n in [9i64, 10, 7] {
        want.extend_from_slice(&n.to_le_bytes());
    }
    want.extend_from_slice(&2u32.to_le_bytes());
    want.push(0); // buy
    for n in [100i64, 0, 4] {
        want.extend_from_slice(&n.to_le_bytes());
    }
    want.push(1); // lost
    assert_eq!(frame, want);
}

#[test]
fn truncated_frames_ask_for_more() {
    let frame = client_frame(&ClientMsg::NewOrder(limit_order()));
    for cut in 0..frame.len() {
        assert_eq!(decode_client(&frame[..cut]), Ok(None), "cut at {cut}");
    }
    assert!(decode_client(&frame).unwrap().is_some());
}

#[test]
fn oversized_length_is_refused_from_the_length_field_alone() {
    let len = (MAX_CLIENT_FRAME as u32 + 1).to_le_bytes();
    let err = decode_client(&len).unwrap_err();
    assert_eq!(
        err,
        WireError::TooLarge {
            len: MAX_CLIENT_FRAME + 1,
            max: MAX_CLIENT_FRAME
        }
    );
    assert_eq!(err.frame_len(), None);
    assert_eq!(err.code(), ErrorCode::TooLarge);
    // The same length is fine from the server, whose limit is larger.
    assert_eq!(decode_server(&len), Ok(None));
    let len = (MAX_SERVER_FRAME as u32 + 1).to_le_bytes();
    assert!(matches!(
        decode_server(&len),
        Err(WireError::TooLarge { .. })
    ));
    assert!(matches!(
        decode_client(&u32::MAX.to_le_bytes()),
        Err(WireError::TooLarge { .. })
    ));
}

#[test]
fn a_length_below_two_cannot_be_resynchronised() {
    for len in [0u32, 1] {
        let err = decode_client(&len.to_le_bytes()).unwrap_err();
        assert_eq!(err, WireError::TooShort);
        assert_eq!(err.frame_len(), None);
        assert_eq!(err.code(), ErrorCode::Malformed);
    }
}

#[test]
fn unknown_type_can_be_skipped() {
    let mut stream = raw(0x7f, &[1, 2, 3]);
    let next = client_frame(&ClientMsg::Cancel { order: 9 });
    stream.extend_from_slice(&next);
    let err = decode_client(&stream).unwrap_err();
    assert_eq!(
        err,
        WireError::UnknownType {
            ty: 0x7f,
            frame_len: 9
        }
    );
    assert_eq!(err.code(), ErrorCode::UnknownType);
    let skip = err.frame_len().unwrap();
    assert_eq!(
        decode_client(&stream[skip..]),
        Ok(Some((ClientMsg::Cancel { order: 9 }, next.len())))
    );
    // A server type sent by a client is unknown to the client decoder, and the other way round.
    let server = server_frame(&ServerMsg::Heartbeat { nonce: 1 });
    assert!(matches!(
        decode_client(&server),
        Err(WireError::UnknownType { ty: 0x83, .. })
    ));
    let client = client_frame(&ClientMsg::Heartbeat { nonce: 1 });
    assert!(matches!(
        decode_server(&client),
        Err(WireError::UnknownType { ty: 0x03, .. })
    ));
}

#[test]
fn bad_version_can_be_skipped() {
    let mut frame = client_frame(&ClientMsg::Heartbeat { nonce: 1 });
    frame[4] = 2;
    let err = decode_client(&frame).unwrap_err();
    assert_eq!(
        err,
        WireError::UnsupportedVersion {
            version: 2,
            frame_len: frame.len()
        }
    );
    assert_eq!(err.code(), ErrorCode::UnsupportedVersion);
    assert_eq!(err.frame_len(), Some(14));
}

#[test]
fn trailing_and_missing_bytes_are_malformed() {
    let mut frame = raw(0x11, &[0; 9]); // Cancel takes 8 bytes
    assert_eq!(
        decode_client(&frame),
        Err(malformed("trailing bytes", &frame))
    );
    frame = raw(0x11, &[0; 7]);
    assert_eq!(decode_client(&frame), Err(malformed("order", &frame)));
    frame = raw(0x83, &[]);
    assert_eq!(decode_server(&frame), Err(malformed("nonce", &frame)));
}

#[test]
fn unknown_flag_bits_are_malformed() {
    let good = client_frame(&ClientMsg::NewOrder(limit_order()));
    let flags_at = 6 + 8 + 4 + 4;
    for bit in 2..8 {
        let mut frame = good.clone();
        frame[flags_at] |= 1 << bit;
        assert_eq!(decode_client(&frame), Err(malformed("flags", &frame)));
    }
}

#[test]
fn an_absent_price_must_be_written_as_zero() {
    let market = NewOrder::market(1, SymbolId(0), Side::Buy, 3);
    let mut frame = client_frame(&ClientMsg::NewOrder(market));
    assert_eq!(frame[6 + 16], 0, "no has_price flag");
    frame[6 + 17] = 1; // low byte of the price
    assert_eq!(decode_client(&frame), Err(malformed("price", &frame)));
}

#[test]
fn unknown_enum_codes_in_an_order_decode_to_none() {
    let mut frame = client_frame(&ClientMsg::NewOrder(limit_order()));
    frame[18..22].copy_from_slice(&[2, 9, 200, 3]);
    let (msg, _) = decode_client(&frame).unwrap().unwrap();
    let ClientMsg::NewOrder(order) = msg else {
        panic!("{msg:?}")
    };
    assert_eq!(
        (order.side, order.order_type, order.tif, order.stp),
        (None, None, None, None)
    );
    let none = NewOrder {
        side: None,
        order_type: None,
        tif: None,
        stp: None,
        ..limit_order()
    };
    assert_eq!(
        client_frame(&ClientMsg::NewOrder(none))[18..22],
        [255, 255, 255, 255]
    );
    let all = NewOrder {
        side: Some(Side::Buy),
        order_type: Some(OrderType::Market),
        tif: Some(Tif::Fok),
        stp: Some(Stp::CancelBoth),
        ..limit_order()
    };
    assert_eq!(
        client_frame(&ClientMsg::NewOrder(all))[18..22],
        [0, 1, 2, 2]
    );
}

#[test]
fn unknown_enum_codes_from_the_server_are_malformed() {
    let trade = ServerMsg::Trade {
        seq: 1,
        ts_ns: 2,
        order: 3,
        symbol: SymbolId(0),
        side: Side::Buy,
        price: 10,
        qty: 1,
        fee: 0,
        liquidity: rialto_wire::Liquidity::Maker,
    };
    let mut frame = server_frame(&trade);
    let side_at = 6 + 8 + 8 + 8 + 4;
    frame[side_at] = 2;
    assert_eq!(decode_server(&frame), Err(malformed("side", &frame)));
    let mut frame = server_frame(&trade);
    *frame.last_mut().unwrap() = 2;
    assert_eq!(decode_server(&frame), Err(malformed("liquidity", &frame)));

    let mut body = 1u16.to_le_bytes().to_vec();
    body[0] = 99;
    body.push(0);
    let frame = raw(0x82, &body);
    assert_eq!(decode_server(&frame), Err(malformed("code", &frame)));

    let mut body = [0u8; 17];
    body[16] = Reason::ALL.len() as u8;
    let frame = raw(0x94, &body);
    assert_eq!(decode_server(&frame), Err(malformed("result", &frame)));
}

/// An AdjustBalance body with the given currency bytes.
fn adjust_balance(currency: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8; 16];
    body.push(currency.len() as u8);
    body.extend_from_slice(currency);
    body.extend_from_slice(&[0; 16]);
    raw(0x42, &body)
}

#[test]
fn bad_names_are_malformed() {
    let good = adjust_balance(b"USD");
    assert!(matches!(
        decode_client(&good),
        Ok(Some((ClientMsg::AdjustBalance { .. }, _)))
    ));
    for bad in [&b""[..], &[b'X'; 24][..], &[0xff, 0xfe][..]] {
        let frame = adjust_balance(bad);
        assert_eq!(decode_client(&frame), Err(malformed("currency", &frame)));
    }
    let longest = adjust_balance(&[b'X'; 23]);
    assert!(decode_client(&longest).unwrap().is_some());
}

#[test]
fn secrets_are_bounded_and_never_printed() {
    assert!(Secret::new(b"").is_none());
    assert!(Secret::new(&[7; 65]).is_none());
    let secret = Secret::new(b"hunter2").unwrap();
    assert_eq!(secret.as_bytes(), b"hunter2");
    let shown = format!(
        "{:?}",
        ClientMsg::Login {
            user: 1,
            secret: secret.clone()
        }
    );
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("7 bytes"), "{shown}");

    for bad_len in [0usize, 65] {
        let mut body = 1i64.to_le_bytes().to_vec();
        body.push(bad_len as u8);
        body.extend(std::iter::repeat_n(b'a', bad_len));
        let frame = raw(0x01, &body);
        assert_eq!(decode_client(&frame), Err(malformed("secret", &frame)));
    }
    let longest = ClientMsg::AdminLogin {
        secret: Secret::new(&[b'a'; 64]).unwrap(),
    };
    let frame = client_frame(&longest);
    assert_eq!(decode_client(&frame), Ok(Some((longest, frame.len()))));
}

#[test]
fn long_error_messages_are_cut_at_a_character_boundary() {
    let message = "é".repeat(200); // 400 bytes
    let frame = server_frame(&ServerMsg::Error {
        code: ErrorCode::Busy,
        message,
    });
    let (msg, _) = decode_server(&frame).unwrap().unwrap();
    let ServerMsg::Error { code, message } = msg else {
        panic!("{msg:?}")
    };
    assert_eq!(code, ErrorCode::Busy);
    assert_eq!(message, "é".repeat(127));
    assert!(message.len() <= MAX_ERROR_MESSAGE);
}

#[test]
fn a_list_count_larger_than_the_body_is_malformed() {
    let mut body = 5u64.to_le_bytes().to_vec();
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    let frame = raw(0x92, &body);
    assert_eq!(
        decode_server(&frame),
        Err(malformed("currency count", &frame))
    );
}

fn longest_name(c: char) -> Name {
    Name::new(&c.to_string().repeat(Name::MAX_LEN)).unwrap()
}

/// Each list at its limit, with the longest names, still fits in one server frame.
#[test]
fn full_lists_fit_in_a_frame() {
    let name = longest_name('N');
    let spec = SymbolSpec {
        symbol: name,
        base: name,
        quote: name,
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        // A future with a band: each spec carries its extension, the largest item.
        band_bps: 1,
        day_end: 1,
        kind: Some(SymbolKind::Future {
            initial_margin: 1,
            maintenance_margin: 1,
            mark_price: 1,
        }),
    };
    let report = UserReport {
        user: 1,
        suspended: false,
        balances: vec![
            (
                name,
                Balance {
                    available: 1,
                    held: 2
                }
            );
            MAX_REPORT_BALANCES
        ],
        orders: vec![
            OpenOrder {
                symbol: name,
                order: 1,
                side: Side::Buy,
                order_type: OrderType::Limit,
                tif: Tif::Gtc,
                price: 1,
                stop_price: 0,
                remaining: 1,
                shown: 1,
                filled: 0,
                expire_ts: 0,
            };
            MAX_REPORT_ORDERS
        ],
        positions: vec![
            Position {
                symbol: name,
                lots: 1,
                cost: 1
            };
            MAX_REPORT_POSITIONS
        ],
        margins: Vec::new(),
    };
    let margins = vec![
        Margin {
            currency: name,
            equity: 1,
            initial: 1,
            maintenance: 1
        };
        MAX_REPORT_MARGINS
    ];
    let totals = rialto_core::CurrencyTotals {
        currency: name,
        deposits: 0,
        withdrawals: 0,
        available: 0,
        held: 0,
        fees: 0,
        insurance: 1,
        position_cost: -1,
    };
    let level = Level { price: 1, qty: 1 };
    let msgs = [
        ServerMsg::SymbolList {
            request: 1,
            symbols: vec![(SymbolId(0), spec); MAX_SYMBOL_LIST_ITEMS],
        },
        ServerMsg::Report {
            request: 2,
            seq: u64::MAX,
            report: report.clone(),
            margins: margins.clone(),
        },
        ServerMsg::ReportExt {
            request: 7,
            seq: u64::MAX,
            report: UserReport {
                orders: vec![report.orders[0].clone(); MAX_REPORT_EXT_ORDERS],
                ..report
            },
            margins,
        },
        ServerMsg::UserList {
            request: 6,
            users: vec![i64::MIN; MAX_USER_LIST_ITEMS],
        },
        ServerMsg::VenueReport {
            request: 3,
            totals: vec![totals; MAX_VENUE_CURRENCIES],
        },
        ServerMsg::Book {
            request: 4,
            seq: 5,
            symbol: SymbolId(0),
            bids: vec![level; MAX_BOOK_LEVELS],
            asks: vec![level; MAX_BOOK_LEVELS],
        },
    ];
    for msg in msgs {
        let frame = server_frame(&msg);
        let len = frame.len() - 4;
        assert!(len <= MAX_SERVER_FRAME, "{len}");
        // The limits are tight: one more item would not fit.
        assert!(len > MAX_SERVER_FRAME - 120, "{len} leaves room to spare");
        assert_eq!(decode_server(&frame), Ok(Some((msg, frame.len()))));
    }
}

#[test]
#[should_panic(expected = "the server must cap it")]
fn encoding_a_list_over_its_limit_is_a_programmer_error() {
    let level = Level { price: 1, qty: 1 };
    server_frame(&ServerMsg::Book {
        request: 1,
        seq: 1,
        symbol: SymbolId(0),
        bids: vec![level; MAX_BOOK_LEVELS + 1],
        asks: vec![],
    });
}

#[test]
fn display_is_readable() {
    let msg = ServerMsg::Rejected {
        seq: 4,
        ts_ns: 5,
        order: 6,
        kind: rialto_wire::RequestKind::MassCancel,
        reason: Reason::UnknownOrder,
    };
    assert_eq!(
        msg.to_string(),
        "rejected seq=4 ts_ns=5 order=6 kind=mass_cancel reason=unknown_order"
    );
    let added = ServerMsg::UserAdded {
        request: 1,
        seq: 2,
        user: 3,
        secret: Secret::new(b"hunter2").unwrap(),
    };
    assert!(!added.to_string().contains("hunter2"));
}

/// docs/protocol.md lists these values; change both together.
#[test]
fn list_limits_are_as_documented() {
    assert_eq!(
        (
            MAX_SYMBOL_LIST_ITEMS,
            MAX_REPORT_BALANCES,
            MAX_REPORT_ORDERS,
            MAX_REPORT_EXT_ORDERS,
            MAX_VENUE_CURRENCIES,
            MAX_BOOK_LEVELS,
            MAX_REPORT_POSITIONS,
            MAX_REPORT_MARGINS,
        ),
        (7_037, 1_024, 18_723, 11_053, 11_915, 32_767, 1_024, 1_024)
    );
}

/// A stop-limit GTD iceberg, part filled, as both report frames carry it: the old Report
/// (0x91) keeps its layout, so an old client reads it as before; ReportExt (0x99), asked for
/// by MyReportExt (0x23) or UserReportExt (0x4e), carries every field.
#[test]
fn report_ext_bytes_are_as_documented_and_report_is_unchanged() {
    let order = OpenOrder {
        symbol: Name::new("BTC").unwrap(),
        order: 9,
        side: Side::Sell,
        order_type: OrderType::StopLimit,
        tif: Tif::Gtd,
        price: 100,
        stop_price: 101,
        remaining: 6,
        shown: 2,
        filled: 4,
        expire_ts: 0x0102,
    };
    let report = UserReport {
        user: 5,
        suspended: false,
        balances: vec![],
        orders: vec![order],
        positions: Vec::new(),
        margins: Vec::new(),
    };
    let i64le = |v: i64| v.to_le_bytes().to_vec();
    let head = [
        i64le(1),
        i64le(2),
        i64le(5),
        vec![0, 0, 0, 0],
        vec![1, 0, 0, 0],
    ]
    .concat();
    let name_and_id = [vec![3], b"BTC".to_vec(), i64le(9)].concat();

    let old = [
        head.clone(),
        name_and_id.clone(),
        vec![1],
        i64le(100),
        i64le(6),
    ]
    .concat();
    let msg = ServerMsg::Report {
        request: 1,
        seq: 2,
        report: report.clone(),
        margins: Vec::new(),
    };
    assert_eq!(server_frame(&msg), raw(0x91, &old));

    let ext = [
        head,
        name_and_id,
        // side sell, type stop_limit, tif gtd
        vec![1, 3, 3],
        i64le(100),
        i64le(101),
        i64le(6),
        i64le(2),
        i64le(4),
        i64le(0x0102),
    ]
    .concat();
    let msg = ServerMsg::ReportExt {
        request: 1,
        seq: 2,
        report,
        margins: Vec::new(),
    };
    let frame = server_frame(&msg);
    assert_eq!(frame, raw(0x99, &ext));
    assert_eq!(decode_server(&frame), Ok(Some((msg, frame.len()))));
    // An order type or tif code this version does not know is malformed.
    let mut bad = raw(0x99, &ext);
    let type_at = 6 + head_len() + 1 + 3 + 8 + 1;
    bad[type_at] = 9;
    assert_eq!(decode_server(&bad), Err(malformed("order type", &bad)));

    assert_eq!(
        client_frame(&ClientMsg::MyReportExt { request: 3 }),
        raw(0x23, &i64le(3))
    );
    assert_eq!(
        client_frame(&ClientMsg::UserReportExt {
            request: 3,
            user: 5
        }),
        raw(0x4e, &[i64le(3), i64le(5)].concat())
    );
}

/// request, seq, user, balance count, order count.
fn head_len() -> usize {
    8 + 8 + 8 + 4 + 4
}

fn le(v: i64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

fn name_bytes(text: &str) -> Vec<u8> {
    [vec![text.len() as u8], text.as_bytes().to_vec()].concat()
}

/// The futures admin frames (SetMarkPrice 0x4f, FundInsurance 0x50) and AddSymbol's
/// extension: present for a future (or a band, or a day end), absent for a plain spot symbol,
/// so a spot AddSymbol keeps its old bytes.
#[test]
fn futures_admin_bytes_are_as_documented() {
    let msg = ClientMsg::SetMarkPrice {
        request: 3,
        symbol: SymbolId(2),
        price: 930,
    };
    let body = [le(3), 2u32.to_le_bytes().to_vec(), le(930)].concat();
    assert_eq!(client_frame(&msg), raw(0x4f, &body));
    let msg = ClientMsg::FundInsurance {
        request: 4,
        currency: Name::new("USD").unwrap(),
        amount: -5,
        tx: 10,
    };
    let body = [le(4), name_bytes("USD"), le(-5), le(10)].concat();
    assert_eq!(client_frame(&msg), raw(0x50, &body));

    let spot = SymbolSpec {
        symbol: Name::new("F").unwrap(),
        base: Name::new("IDX").unwrap(),
        quote: Name::new("USD").unwrap(),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    };
    let spec_bytes = [
        name_bytes("F"),
        name_bytes("IDX"),
        name_bytes("USD"),
        le(1),
        le(1),
        le(0),
        le(0),
    ]
    .concat();
    let plain = [le(1), spec_bytes.clone()].concat();
    let add = |spec| ClientMsg::AddSymbol { request: 1, spec };
    assert_eq!(client_frame(&add(spot)), raw(0x40, &plain));
    let future = SymbolSpec {
        band_bps: 500,
        kind: Some(SymbolKind::Future {
            initial_margin: 100,
            maintenance_margin: 50,
            mark_price: 1000,
        }),
        ..spot
    };
    let extended = [
        plain.clone(),
        le(500),
        le(0),
        vec![1],
        le(100),
        le(50),
        le(1000),
    ]
    .concat();
    let frame = client_frame(&add(future));
    assert_eq!(frame, raw(0x40, &extended));
    assert_eq!(decode_client(&frame), Ok(Some((add(future), frame.len()))));
    // A type code this version does not know reaches the engine as `kind: None`
    // (`invalid_symbol`); a spot extension with margins is malformed.
    let mut unknown = extended.clone();
    let type_at = plain.len() + 16;
    unknown[type_at] = 7;
    let frame = raw(0x40, &unknown);
    let Ok(Some((ClientMsg::AddSymbol { spec, .. }, _))) = decode_client(&frame) else {
        panic!("an unknown type code is not a decoding matter");
    };
    assert_eq!(spec.kind, None);
    let mut spot_with_margin = extended;
    spot_with_margin[type_at] = 0;
    let frame = raw(0x40, &spot_with_margin);
    assert_eq!(
        decode_client(&frame),
        Err(malformed("initial_margin", &frame))
    );
}

/// Report's futures part (positions and margins) and VenueReport's and VenueSettings' futures
/// parts follow the old layouts and are there only when they hold something.
#[test]
fn futures_parts_of_replies_are_as_documented() {
    let usd = Name::new("USD").unwrap();
    let report = UserReport {
        user: 5,
        suspended: false,
        balances: vec![],
        orders: vec![],
        positions: vec![Position {
            symbol: Name::new("F").unwrap(),
            lots: -2,
            cost: -2000,
        }],
        margins: Vec::new(),
    };
    let margins = vec![Margin {
        currency: usd,
        equity: 180,
        initial: 200,
        maintenance: 100,
    }];
    let old = [le(1), le(2), le(5), vec![0; 4], vec![0; 4]].concat();
    let futures = [
        1u32.to_le_bytes().to_vec(),
        name_bytes("F"),
        le(-2),
        le(-2000),
        1u32.to_le_bytes().to_vec(),
        name_bytes("USD"),
        le(180),
        le(200),
        le(100),
    ]
    .concat();
    let msg = ServerMsg::Report {
        request: 1,
        seq: 2,
        report: report.clone(),
        margins: margins.clone(),
    };
    let frame = server_frame(&msg);
    assert_eq!(frame, raw(0x91, &[old.clone(), futures].concat()));
    assert_eq!(decode_server(&frame), Ok(Some((msg, frame.len()))));
    // A futures part with nothing in it is not the way to say "none": it is left out.
    let empty = [old, vec![0; 8]].concat();
    let frame = raw(0x91, &empty);
    assert_eq!(
        decode_server(&frame),
        Err(malformed("position count", &frame))
    );

    let totals = CurrencyTotals {
        currency: usd,
        deposits: 21200,
        withdrawals: 0,
        available: 20000,
        held: 0,
        fees: 0,
        insurance: 950,
        position_cost: -250,
    };
    let body = [
        le(3),
        1u32.to_le_bytes().to_vec(),
        name_bytes("USD"),
        le(21200),
        le(0),
        le(20000),
        le(0),
        le(0),
        1u32.to_le_bytes().to_vec(),
        le(950),
        (-250i128).to_le_bytes().to_vec(),
    ]
    .concat();
    let msg = ServerMsg::VenueReport {
        request: 3,
        totals: vec![totals],
    };
    assert_eq!(server_frame(&msg), raw(0x92, &body));
    let spot_only = ServerMsg::VenueReport {
        request: 3,
        totals: vec![CurrencyTotals {
            insurance: 0,
            position_cost: 0,
            ..totals
        }],
    };
    assert_eq!(server_frame(&spot_only).len(), 6 + body.len() - 4 - 24);

    let status = SymbolStatus {
        phase: Phase::Continuous,
        last: 0,
        reference: 0,
        band_bps: 0,
        future: true,
        mark: 930,
    };
    let body = [
        le(1),
        le(2),
        le(0),
        1u32.to_le_bytes().to_vec(),
        0u32.to_le_bytes().to_vec(),
        vec![0],
        le(0),
        le(0),
        le(0),
        1u32.to_le_bytes().to_vec(),
        vec![1],
        le(930),
    ]
    .concat();
    let msg = ServerMsg::VenueSettings {
        request: 1,
        seq: 2,
        order_id_window_ns: 0,
        symbols: vec![(SymbolId(0), status)],
    };
    let frame = server_frame(&msg);
    assert_eq!(frame, raw(0x98, &body));
    assert_eq!(decode_server(&frame), Ok(Some((msg, frame.len()))));
}
