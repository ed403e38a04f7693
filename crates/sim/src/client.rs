//! A simulated trader: logs in, takes its open orders from a report, builds orders, cancels and
//! amends, and keeps its view of its open orders from nothing but the messages it receives.

use std::collections::{BTreeMap, VecDeque};

use rialto_core::{AmendOrder, Command, OrderId, PlaceOrder, Side, SymbolId, Tif, UserId};
use rialto_server::pipeline::{Op, Reply, Request, SessionId};
use rialto_wire::{ErrorCode, RequestKind, ServerMsg};

use crate::rng::Rng;

/// Prices stay within this range (in ticks), well inside the demo venue's 10% band.
const PRICE_MIN: i64 = 49_500;
const PRICE_MAX: i64 = 50_500;
/// A trader with this many open orders cancels or amends rather than places.
const OPEN_MAX: usize = 8;

/// Where a trader's connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// It sent its login, with the right secret or a wrong one, and waits for the answer.
    LoggingIn { right_secret: bool },
    /// Not logged in: its login was refused (it waits for the server to close the
    /// connection), or it has no connection.
    Refused,
    /// Logged in; it asked for a report (request id), which gives it its open orders.
    Reporting { request: u64 },
    /// It trades.
    Trading,
}

pub struct Client {
    pub user: UserId,
    /// Its connection's session.
    pub session: SessionId,
    pub link: Link,
    /// Logins it made with a wrong secret.
    pub wrong_logins: u32,
    next_request: u64,
    next_order: OrderId,
    /// Requests built and not yet taken by the inbound ring, oldest first.
    pub outbox: VecDeque<Request>,
    /// Requests in the pipeline, oldest first, waiting for their Accepted or Rejected: the
    /// order id, what was asked, and for a place its quantity.
    pub in_flight: VecDeque<(OrderId, RequestKind, i64)>,
    /// The client's open orders as its replies tell it: order id → remaining quantity.
    pub view: BTreeMap<OrderId, i64>,
    /// Orders it was told were accepted (places), with the seq of the Accepted.
    pub acked_places: Vec<(OrderId, u64)>,
    /// Places that were in flight on a connection that ended, with their quantity: the server
    /// may still apply them (their bytes reached it) after the report of the next login, and
    /// their Accepted went to the old session. A fill or cancellation of one tells the trader
    /// it was accepted; until then the engine may hold it open untouched.
    pub unknown: BTreeMap<OrderId, i64>,
}

impl Client {
    pub fn new(user: UserId) -> Client {
        Client {
            user,
            session: 0,
            link: Link::Refused,
            wrong_logins: 0,
            next_request: 1,
            next_order: 1,
            outbox: VecDeque::new(),
            in_flight: VecDeque::new(),
            view: BTreeMap::new(),
            acked_places: Vec::new(),
            unknown: BTreeMap::new(),
        }
    }

    /// Builds one request: mostly limit orders, some IOC, cancels and amends of its orders.
    pub fn act(&mut self, rng: &mut Rng, symbols: &[SymbolId]) {
        let open: Vec<OrderId> = self.view.keys().copied().collect();
        // At most OPEN_MAX open orders, so that a report fits the smallest output bound.
        let roll = match rng.below(100) {
            roll if open.len() >= OPEN_MAX => roll % 32,
            roll => roll,
        };
        let (order, kind, cmd) = if roll < 20 && !open.is_empty() {
            let order = open[rng.below(open.len() as u64) as usize];
            (
                order,
                RequestKind::Cancel,
                Command::Cancel {
                    user: self.user,
                    order,
                },
            )
        } else if roll < 32 && !open.is_empty() {
            let order = open[rng.below(open.len() as u64) as usize];
            let amend = AmendOrder::new(self.user, order);
            let amend = match rng.below(3) {
                0 => amend.with_price(rng.range(PRICE_MIN, PRICE_MAX)),
                1 => amend.with_qty(rng.range(1, 20)),
                _ => amend
                    .with_price(rng.range(PRICE_MIN, PRICE_MAX))
                    .with_qty(rng.range(1, 20)),
            };
            (order, RequestKind::Amend, Command::Amend(amend))
        } else if roll < 34 {
            // An order id it never used: rejected, and nothing changes.
            let order = self.next_order + 1_000_000;
            (
                order,
                RequestKind::Cancel,
                Command::Cancel {
                    user: self.user,
                    order,
                },
            )
        } else {
            let order = self.next_order;
            self.next_order += 1;
            let symbol = symbols[rng.below(symbols.len() as u64) as usize];
            let side = if rng.below(2) == 0 {
                Side::Buy
            } else {
                Side::Sell
            };
            let price = rng.range(PRICE_MIN, PRICE_MAX);
            let qty = rng.range(1, 20);
            let mut place = PlaceOrder::limit(self.user, order, symbol, side, price, qty);
            if roll >= 90 {
                place = place.with_tif(Tif::Ioc);
            }
            (order, RequestKind::Place, Command::Place(place))
        };
        self.outbox.push_back(Request {
            session: self.session,
            reply: Reply::Order { order, kind },
            op: Op::Command(cmd),
        });
    }

    /// The oldest request of the outbox entered the pipeline.
    pub fn sent(&mut self) {
        let request = self.outbox.pop_front().expect("a request was sent");
        let (Reply::Order { order, kind }, Op::Command(cmd)) = (request.reply, &request.op) else {
            unreachable!("clients send order requests only")
        };
        let qty = match cmd {
            Command::Place(p) => p.qty,
            _ => 0,
        };
        self.in_flight.push_back((order, kind, qty));
    }

    /// Takes one message meant for this client. An error says what contradicts the protocol.
    /// Returns the id of a report to ask for, once its login is granted.
    pub fn receive(&mut self, msg: &ServerMsg) -> Result<Option<u64>, String> {
        match (self.link, msg) {
            (Link::Trading, _) => self.trade(msg).map(|()| None),
            (Link::LoggingIn { right_secret }, ServerMsg::LoginAccepted { user, .. }) => {
                if !right_secret || *user != self.user {
                    return Err(format!(
                        "user {}: a login with a wrong secret was granted: {msg:?}",
                        self.user
                    ));
                }
                let request = self.next_request;
                self.next_request += 1;
                self.link = Link::Reporting { request };
                Ok(Some(request))
            }
            (Link::LoggingIn { right_secret }, ServerMsg::Error { code, .. }) => {
                if right_secret {
                    return Err(format!(
                        "user {}: a login with the right secret was refused: {msg:?}",
                        self.user
                    ));
                }
                if *code != ErrorCode::AuthFailed {
                    return Err(format!(
                        "user {}: a wrong secret refused with {msg:?}",
                        self.user
                    ));
                }
                self.link = Link::Refused;
                Ok(None)
            }
            (
                Link::Reporting { request },
                ServerMsg::Report {
                    request: r, report, ..
                },
            ) if *r == request => {
                self.view = report
                    .orders
                    .iter()
                    .map(|o| (o.order, o.remaining))
                    .collect();
                self.unknown
                    .retain(|order, _| !self.view.contains_key(order));
                self.link = Link::Trading;
                Ok(None)
            }
            // Before its report, what happened to its orders is in the report.
            (
                Link::Reporting { .. },
                ServerMsg::Trade { .. } | ServerMsg::Cancelled { .. } | ServerMsg::Amended { .. },
            ) => Ok(None),
            (
                _,
                ServerMsg::Accepted { .. } | ServerMsg::Rejected { .. } | ServerMsg::Report { .. },
            ) => Err(format!("user {}: a reply to nothing: {msg:?}", self.user)),
            _ => Ok(None),
        }
    }

    /// Takes one message while trading.
    fn trade(&mut self, msg: &ServerMsg) -> Result<(), String> {
        if let ServerMsg::Trade { order, .. }
        | ServerMsg::Cancelled { order, .. }
        | ServerMsg::Amended { order, .. } = *msg
            && !self.view.contains_key(&order)
            && let Some(qty) = self.unknown.remove(&order)
        {
            self.view.insert(order, qty); // a place from a lost connection, accepted after all
        }
        match *msg {
            ServerMsg::Accepted {
                seq, order, kind, ..
            }
            | ServerMsg::Rejected {
                seq, order, kind, ..
            } => {
                let Some((asked, asked_kind, qty)) = self.in_flight.pop_front() else {
                    return Err(format!("user {}: a reply to nothing: {msg:?}", self.user));
                };
                if (asked, asked_kind) != (order, kind) {
                    return Err(format!(
                        "user {}: the reply {msg:?} answers ({order}, {kind:?}) where \
                         ({asked}, {asked_kind:?}) was asked first",
                        self.user
                    ));
                }
                if matches!(msg, ServerMsg::Accepted { .. }) && kind == RequestKind::Place {
                    self.view.insert(order, qty);
                    self.acked_places.push((order, seq));
                }
            }
            ServerMsg::Trade { order, qty, .. } => {
                let Some(remaining) = self.view.get_mut(&order) else {
                    return Err(format!(
                        "user {}: a trade of order {order}, not open: {msg:?}",
                        self.user
                    ));
                };
                *remaining -= qty;
                if *remaining < 0 {
                    return Err(format!(
                        "user {}: order {order} traded more than it had: {msg:?}",
                        self.user
                    ));
                }
                if *remaining == 0 {
                    self.view.remove(&order);
                }
            }
            ServerMsg::Cancelled { order, .. } => {
                self.view.remove(&order).ok_or_else(|| {
                    format!(
                        "user {}: order {order} cancelled, not open: {msg:?}",
                        self.user
                    )
                })?;
            }
            ServerMsg::Amended {
                order, remaining, ..
            } => {
                let Some(open) = self.view.get_mut(&order) else {
                    return Err(format!(
                        "user {}: order {order} amended, not open: {msg:?}",
                        self.user
                    ));
                };
                *open = remaining;
            }
            _ => {}
        }
        Ok(())
    }

    /// Its connection ended (it dropped it, the server closed it, or the node died): what it
    /// had in flight is unknown to it; its view waits for the report of its next login.
    pub fn disconnected(&mut self) {
        self.outbox.clear();
        for (order, kind, qty) in self.in_flight.drain(..) {
            if kind == RequestKind::Place {
                self.unknown.insert(order, qty);
            }
        }
        self.link = Link::Refused;
    }

    /// It connected again as `session` and sent its login.
    pub fn connecting(&mut self, session: SessionId, right_secret: bool) {
        self.session = session;
        self.link = Link::LoggingIn { right_secret };
        if !right_secret {
            self.wrong_logins += 1;
        }
    }

    /// The node died: nothing it sent is still on its way, and what was applied is in the
    /// report of its next login.
    pub fn node_died(&mut self) {
        self.disconnected();
        self.unknown.clear();
    }

    /// Whether the engine's open orders of this user (order id → remaining) are what its view
    /// says, but for places from a lost connection the engine holds untouched.
    pub fn view_matches(&self, engine: &BTreeMap<OrderId, i64>) -> bool {
        let mut expected = engine.clone();
        expected.retain(|order, remaining| {
            self.view.contains_key(order) || self.unknown.get(order) != Some(remaining)
        });
        expected == self.view
    }

    /// Nothing it sent on its connection waits for an answer.
    pub fn answered(&self) -> bool {
        self.link == Link::Trading && self.in_flight.is_empty()
    }
}
