//! Futures over the binary gateway and the admin port, end to end: the admin adds a future and
//! funds the insurance fund, two users trade a position, the admin moves the mark, and a user
//! under maintenance margin is liquidated (docs/rules.md, "Futures"; docs/protocol.md).

mod common;

use common::{admin, recv_until, start, trader};
use rialto_client::Client;
use rialto_core::{
    CancelReason, Name, Position, Reason, Side, SymbolId, SymbolKind, SymbolSpec, UserId,
};
use rialto_wire::{ClientMsg, Liquidity, Margin, NewOrder, ServerMsg};

fn name(text: &str) -> Name {
    Name::new(text).unwrap()
}

/// The future of docs/rules.md's examples: IDX/USD, scales 1, no fees, initial margin 100 and
/// maintenance 50 a lot, mark 1000.
fn future_spec() -> SymbolSpec {
    SymbolSpec {
        symbol: name("F"),
        base: name("IDX"),
        quote: name("USD"),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: Some(SymbolKind::Future {
            initial_margin: 100,
            maintenance_margin: 50,
            mark_price: 1000,
        }),
    }
}

fn admin_ok(a: &mut Client, msg: ClientMsg) {
    let reply = a.request(&msg).unwrap();
    assert!(
        matches!(reply, ServerMsg::AdminResult { result: Ok(()), .. }),
        "{msg:?}: {reply}"
    );
}

fn add_funded_user(a: &mut Client, user: UserId, usd: i64) {
    let reply = a.request(&ClientMsg::AddUser { request: 1, user }).unwrap();
    assert!(matches!(reply, ServerMsg::UserAdded { .. }), "{reply}");
    admin_ok(
        a,
        ClientMsg::AdjustBalance {
            request: 2,
            user,
            currency: name("USD"),
            amount: usd,
            tx: 9_000 + user,
        },
    );
}

/// A report's positions and margins, as MyReport (0x91) and MyReportExt (0x99) give them.
fn futures_report(c: &mut Client) -> (Vec<Position>, Vec<Margin>) {
    let plain = match c.request(&ClientMsg::MyReport { request: 5 }).unwrap() {
        ServerMsg::Report {
            report, margins, ..
        } => (report.positions, margins),
        other => panic!("report: {other}"),
    };
    let ext = match c.request(&ClientMsg::MyReportExt { request: 6 }).unwrap() {
        ServerMsg::ReportExt {
            report, margins, ..
        } => (report.positions, margins),
        other => panic!("report ext: {other}"),
    };
    assert_eq!(plain, ext, "both report forms carry the same futures part");
    plain
}

fn accepted(c: &mut Client, order: NewOrder) {
    c.place(order).unwrap();
    let (msg, _) = recv_until(c, |m| {
        matches!(m, ServerMsg::Accepted { .. } | ServerMsg::Rejected { .. })
    });
    assert!(
        matches!(msg, ServerMsg::Accepted { order: o, .. } if o == order.order),
        "{msg}"
    );
}

fn position(symbol: &str, lots: i64, cost: i64) -> Position {
    Position {
        symbol: name(symbol),
        lots,
        cost,
    }
}

#[test]
fn a_user_under_maintenance_is_liquidated_and_told_so_and_the_fund_pays_its_shortfall() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut a = admin(&server);
    admin_ok(
        &mut a,
        ClientMsg::AddSymbol {
            request: 1,
            spec: future_spec(),
        },
    );
    let symbols = match a.request(&ClientMsg::ListSymbols { request: 2 }).unwrap() {
        ServerMsg::SymbolList { symbols, .. } => symbols,
        other => panic!("{other}"),
    };
    let (f, listed) = symbols
        .into_iter()
        .find(|(_, spec)| spec.symbol == name("F"))
        .expect("F is listed");
    assert_eq!(listed, future_spec(), "the list gives the future's terms");
    admin_ok(
        &mut a,
        ClientMsg::FundInsurance {
            request: 3,
            currency: name("USD"),
            amount: 1_000,
            tx: 9_000,
        },
    );
    // The same tx again is refused, as adjust_balance's are.
    let again = a
        .request(&ClientMsg::FundInsurance {
            request: 4,
            currency: name("USD"),
            amount: 1_000,
            tx: 9_000,
        })
        .unwrap();
    assert!(
        matches!(
            again,
            ServerMsg::AdminResult {
                result: Err(Reason::DuplicateTx),
                ..
            }
        ),
        "{again}"
    );
    add_funded_user(&mut a, 100, 200);
    add_funded_user(&mut a, 101, 10_000);
    add_funded_user(&mut a, 102, 10_000);
    let (mut long, mut short, mut bidder) = (
        trader(&server, 100),
        trader(&server, 101),
        trader(&server, 102),
    );

    // User 100 buys 2 @1000 from user 101: long 2, cost 2000.
    accepted(&mut long, NewOrder::limit(1, f, Side::Buy, 1_000, 2));
    accepted(&mut short, NewOrder::limit(1, f, Side::Sell, 1_000, 2));
    // A sell that does not raise its margin rests beside the position.
    accepted(&mut long, NewOrder::limit(3, f, Side::Sell, 1_100, 1));
    let usd_margin = |equity, initial, maintenance| Margin {
        currency: name("USD"),
        equity,
        initial,
        maintenance,
    };
    assert_eq!(
        futures_report(&mut long),
        (
            vec![position("F", 2, 2_000)],
            vec![usd_margin(200, 200, 100)]
        )
    );
    assert_eq!(
        futures_report(&mut short).0,
        vec![position("F", -2, -2_000)]
    );
    // A user without futures gets a report without a futures part.
    assert_eq!(futures_report(&mut bidder), (vec![], vec![]));

    accepted(&mut bidder, NewOrder::limit(1, f, Side::Buy, 900, 1));
    accepted(&mut bidder, NewOrder::limit(2, f, Side::Buy, 850, 1));

    // Only a future has a mark.
    let spot = a
        .request(&ClientMsg::SetMarkPrice {
            request: 5,
            symbol: SymbolId(0),
            price: 1,
        })
        .unwrap();
    assert!(
        matches!(
            spot,
            ServerMsg::AdminResult {
                result: Err(Reason::InvalidSymbol),
                ..
            }
        ),
        "{spot}"
    );
    // Mark 930: equity 200 + 2 × (930 − 1000) = 60 under maintenance 100.
    admin_ok(
        &mut a,
        ClientMsg::SetMarkPrice {
            request: 6,
            symbol: f,
            price: 930,
        },
    );
    let (liquidated, before) = recv_until(&mut long, |m| matches!(m, ServerMsg::Liquidated { .. }));
    let ServerMsg::Liquidated {
        currency,
        equity,
        maintenance,
        shortfall,
        seq,
        ..
    } = liquidated
    else {
        unreachable!()
    };
    assert_eq!(
        (currency, equity, maintenance, shortfall),
        (name("USD"), 60, 100, 50)
    );
    let events: Vec<_> = before
        .into_iter()
        .filter(|m| matches!(m, ServerMsg::Cancelled { seq: s, .. } | ServerMsg::Trade { seq: s, .. } if *s == seq))
        .map(|m| match m {
            ServerMsg::Cancelled {
                order, qty, reason, ..
            } => format!("cancelled {order} {qty} {reason}"),
            ServerMsg::Trade {
                order,
                side,
                price,
                qty,
                liquidity,
                ..
            } => {
                assert_eq!((side, liquidity), (Side::Sell, Liquidity::Taker));
                format!("trade {order} {price}x{qty}")
            }
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        events,
        [
            format!("cancelled 3 1 {}", CancelReason::Liquidation),
            "trade 0 900x1".to_string(),
            "trade 0 850x1".to_string(),
        ],
        "the liquidation's cancellation, then its close (order 0), then Liquidated"
    );
    // The bidder's orders were the close's makers.
    let (fill, _) = recv_until(&mut bidder, |m| {
        matches!(m, ServerMsg::Trade { order: 2, .. })
    });
    assert!(
        matches!(
            fill,
            ServerMsg::Trade {
                price: 850,
                liquidity: Liquidity::Maker,
                ..
            }
        ),
        "{fill}"
    );

    assert_eq!(futures_report(&mut long), (vec![], vec![]));
    assert_eq!(futures_report(&mut bidder).0, vec![position("F", 2, 1_750)]);
    let totals = match a.request(&ClientMsg::VenueReport { request: 7 }).unwrap() {
        ServerMsg::VenueReport { totals, .. } => totals,
        other => panic!("{other}"),
    };
    let usd = totals
        .iter()
        .find(|t| t.currency == name("USD"))
        .expect("USD");
    // The demo venue's own fund, plus 1,000, less the 50 paid.
    let fund = rialto_server::demo::DEMO_INSURANCE + 950;
    assert_eq!((usd.insurance, usd.position_cost), (fund, 1_750 - 2_000));
    assert_eq!(
        usd.available + usd.held + usd.fees + usd.insurance - usd.position_cost as i64,
        usd.deposits - usd.withdrawals,
        "conservation with the fund and the positions' cost"
    );
    let settings = match a.request(&ClientMsg::VenueSettings { request: 8 }).unwrap() {
        ServerMsg::VenueSettings { symbols, .. } => symbols,
        other => panic!("{other}"),
    };
    let (_, status) = settings.iter().find(|(id, _)| *id == f).expect("F");
    assert!(status.future);
    assert_eq!(status.mark, 930);
    let (_, spot_status) = settings.iter().find(|(id, _)| *id == SymbolId(0)).unwrap();
    assert!(!spot_status.future);
}
