//! The demo's future (README, docs/operations.md "The demo venue"): `rialto serve --demo` lists
//! BTC-PERP, two demo users trade it, and its mark follows the trades.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::serve_demo;
use rialto_client::Client;
use rialto_core::{Name, Side, SymbolKind};
use rialto_server::demo::{
    DEMO_FUTURE, DEMO_FUTURE_MARK, DEMO_INSURANCE, DEMO_MARGIN_FUNDS, DEMO_MARGIN_USER,
};
use rialto_wire::{ClientMsg, NewOrder, ServerMsg};

fn connect(addr: &str) -> Client {
    let mut c = Client::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

fn trader(addr: &str, data: &Path, user: i64) -> Client {
    let credentials = rialto_server::auth::Credentials::load_or_create(data).unwrap();
    let mut c = connect(addr);
    c.login(user, credentials.user_secret(user).as_bytes())
        .unwrap();
    c
}

/// The future's mark, from the admin port's VenueSettings.
fn mark(admin: &mut Client, symbol: rialto_core::SymbolId) -> i64 {
    match admin
        .request(&ClientMsg::VenueSettings { request: 3 })
        .unwrap()
    {
        ServerMsg::VenueSettings { symbols, .. } => {
            let (_, status) = symbols.iter().find(|(id, _)| *id == symbol).unwrap();
            assert!(status.future, "{DEMO_FUTURE} is a future");
            status.mark
        }
        other => panic!("{other}"),
    }
}

/// Waits until the mark is `want`. The binary protocol announces no mark change (an operator
/// sets it, and asks), so this asks again until it holds, for at most ten seconds.
fn mark_becomes(admin: &mut Client, symbol: rialto_core::SymbolId, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = mark(admin, symbol);
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the mark stayed {now}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A sell by user 1 and a buy by user 2 at `price`, which trade one lot.
fn trade(
    seller: &mut Client,
    buyer: &mut Client,
    id: i64,
    symbol: rialto_core::SymbolId,
    price: i64,
) {
    seller
        .place(NewOrder::limit(id, symbol, Side::Sell, price, 1))
        .unwrap();
    buyer
        .place(NewOrder::limit(id, symbol, Side::Buy, price, 1))
        .unwrap();
    // The seller's own fill of the trade before comes first; then its Accepted, and the
    // buyer's Accepted and fill.
    for (who, c) in [("seller", &mut *seller), ("buyer", &mut *buyer)] {
        let msg = loop {
            match c.recv().unwrap() {
                ServerMsg::Trade { order, .. } if order != id => continue,
                msg => break msg,
            }
        };
        assert!(
            matches!(msg, ServerMsg::Accepted { order, .. } if order == id),
            "{who}: {msg}"
        );
    }
    match buyer.recv().unwrap() {
        ServerMsg::Trade { price: p, qty, .. } => assert_eq!((p, qty), (price, 1)),
        other => panic!("{other}"),
    }
}

#[test]
fn the_demo_lists_btc_perp_and_its_mark_follows_its_trades() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let served = serve_demo(&data);
    let orders = served.address_after("orders on ");
    let mut admin = connect(served.address_after("admin on "));
    let credentials = rialto_server::auth::Credentials::load_or_create(&data).unwrap();
    admin
        .admin_login(credentials.admin_secret().as_bytes())
        .unwrap();

    let symbols = match admin
        .request(&ClientMsg::ListSymbols { request: 1 })
        .unwrap()
    {
        ServerMsg::SymbolList { symbols, .. } => symbols,
        other => panic!("{other}"),
    };
    let (perp, spec) = symbols
        .iter()
        .find(|(_, s)| s.symbol.as_str() == DEMO_FUTURE)
        .unwrap_or_else(|| panic!("{DEMO_FUTURE} listed: {symbols:?}"));
    assert!(matches!(spec.kind, Some(SymbolKind::Future { .. })));
    assert_eq!(spec.quote, Name::new("USD").unwrap());
    assert_eq!(mark(&mut admin, *perp), DEMO_FUTURE_MARK);
    let totals = match admin
        .request(&ClientMsg::VenueReport { request: 2 })
        .unwrap()
    {
        ServerMsg::VenueReport { totals, .. } => totals,
        other => panic!("{other}"),
    };
    let usd = totals
        .iter()
        .find(|t| t.currency.as_str() == "USD")
        .unwrap();
    assert_eq!(usd.insurance, DEMO_INSURANCE);

    // Two demo users trade it; the mark becomes the trade's price.
    let (mut seller, mut buyer) = (trader(orders, &data, 1), trader(orders, &data, 2));
    trade(&mut seller, &mut buyer, 1, *perp, 510_000);
    mark_becomes(&mut admin, *perp, 510_000);
    // The next trade comes within the follower's interval: the mark still gets there.
    trade(&mut seller, &mut buyer, 2, *perp, 512_000);
    mark_becomes(&mut admin, *perp, 512_000);

    match buyer.request(&ClientMsg::MyReport { request: 4 }).unwrap() {
        ServerMsg::Report {
            report, margins, ..
        } => {
            let p = &report.positions;
            assert_eq!(p.len(), 1, "{p:?}");
            assert_eq!((p[0].lots, p[0].cost), (2, 510_000 + 512_000));
            assert_eq!(margins.len(), 1);
            assert_eq!(margins[0].maintenance, 2 * 25_000);
        }
        other => panic!("{other}"),
    }
}

/// Reads `c`'s messages until one matches `want`, for at most ten seconds each.
fn recv_until(c: &mut Client, what: &str, want: impl Fn(&ServerMsg) -> bool) -> ServerMsg {
    loop {
        match c.recv() {
            Ok(msg) if want(&msg) => return msg,
            Ok(_) => {}
            Err(e) => panic!("waiting for {what}: {e}"),
        }
    }
}

#[test]
fn the_demo_user_with_little_money_is_liquidated_when_the_mark_follows_the_book_down() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let served = serve_demo(&data);
    let orders = served.address_after("orders on ");
    let perp = rialto_core::SymbolId(2);
    let (mut maker, mut bidder, mut seller) = (
        trader(orders, &data, 1),
        trader(orders, &data, 2),
        trader(orders, &data, 3),
    );
    let mut small = trader(orders, &data, DEMO_MARGIN_USER);

    // The small user buys 19 lots at 500,000: 950,000 of initial margin out of its 1,000,000.
    maker
        .place(NewOrder::limit(1, perp, Side::Sell, 500_000, 19))
        .unwrap();
    recv_until(&mut maker, "the maker's Accepted", |m| {
        matches!(m, ServerMsg::Accepted { order: 1, .. })
    });
    small
        .place(NewOrder::limit(1, perp, Side::Buy, 500_000, 19))
        .unwrap();
    recv_until(&mut small, "the small user's fill", |m| {
        matches!(
            m,
            ServerMsg::Trade {
                order: 1,
                qty: 19,
                ..
            }
        )
    });
    assert_eq!(DEMO_MARGIN_FUNDS, 1_000_000);

    // Bids at 470,000 to close it into, then one trade there: the mark follows it down, the
    // small user's equity (1,000,000 - 19 of fees - 19 * 30,000) falls under its maintenance
    // margin (19 * 25,000) and it is liquidated into those bids.
    bidder
        .place(NewOrder::limit(1, perp, Side::Buy, 470_000, 30))
        .unwrap();
    recv_until(&mut bidder, "the bidder's Accepted", |m| {
        matches!(m, ServerMsg::Accepted { order: 1, .. })
    });
    seller
        .place(NewOrder::limit(1, perp, Side::Sell, 470_000, 1))
        .unwrap();
    let liquidated = recv_until(&mut small, "its liquidation", |m| {
        matches!(m, ServerMsg::Liquidated { .. })
    });
    match liquidated {
        ServerMsg::Liquidated {
            currency,
            equity,
            maintenance,
            shortfall,
            ..
        } => {
            assert_eq!(currency.as_str(), "USD");
            assert_eq!(equity, 1_000_000 - 19 - 19 * 30_000);
            assert_eq!((maintenance, shortfall), (19 * 25_000, 0));
        }
        other => panic!("{other}"),
    }
    match small.request(&ClientMsg::MyReport { request: 9 }).unwrap() {
        ServerMsg::Report { report, .. } => {
            assert!(report.positions.is_empty(), "{:?}", report.positions);
        }
        other => panic!("{other}"),
    }
}
