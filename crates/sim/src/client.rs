//! A simulated trader: builds orders, cancels and amends as the gateways would push them, and
//! keeps its view of its open orders from nothing but the replies it receives.

use std::collections::{BTreeMap, VecDeque};

use rialto_core::{AmendOrder, Command, OrderId, PlaceOrder, Side, SymbolId, Tif, UserId};
use rialto_server::pipeline::{Op, Reply, Request, SessionId};
use rialto_wire::{RequestKind, ServerMsg};

use crate::rng::Rng;

/// Prices stay within this range (in ticks), well inside the demo venue's 10% band.
const PRICE_MIN: i64 = 49_500;
const PRICE_MAX: i64 = 50_500;

pub struct Client {
    pub user: UserId,
    pub session: SessionId,
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
}

impl Client {
    pub fn new(user: UserId, session: SessionId) -> Client {
        Client {
            user,
            session,
            next_order: 1,
            outbox: VecDeque::new(),
            in_flight: VecDeque::new(),
            view: BTreeMap::new(),
            acked_places: Vec::new(),
        }
    }

    /// Builds one request: mostly limit orders, some IOC, cancels and amends of its orders.
    pub fn act(&mut self, rng: &mut Rng, symbols: &[SymbolId]) {
        let open: Vec<OrderId> = self.view.keys().copied().collect();
        let roll = rng.below(100);
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
    pub fn receive(&mut self, msg: &ServerMsg) -> Result<(), String> {
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

    /// After a restart: the connection is gone with whatever was in flight; a trader logs in
    /// again and asks for its open orders (a Report), which become its view.
    pub fn reconnect(&mut self, open_orders: BTreeMap<OrderId, i64>) {
        self.outbox.clear();
        self.in_flight.clear();
        self.view = open_orders;
    }
}
