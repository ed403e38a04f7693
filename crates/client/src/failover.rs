//! A client for a venue of several nodes (docs/replication.md, "Clients across a fail-over"):
//! it knows every node's order address, logs in at whichever leads (a standby does not listen;
//! a deposed leader exits), and when the connection drops (or the node says `shutting_down`)
//! it logs in again at the next node
//! that answers and learns the fate of each order it had in flight with an OrderStatus query:
//! `open` or `ended` were placed (their Accepted was lost with the connection), `unknown` were
//! not, and are sent again. The venue's order-id window makes a resend safe: an order id that
//! was placed is refused as `duplicate_order_id`, never executed twice.
//!
//! ```no_run
//! use rialto_client::failover::{Delivery, FailoverClient};
//! use rialto_core::{Side, SymbolId};
//! use rialto_wire::NewOrder;
//!
//! # fn main() -> Result<(), rialto_client::ClientError> {
//! let nodes = ["127.0.0.1:9100", "127.0.0.1:9200"];
//! let mut client = FailoverClient::connect(&nodes, 1, b"secret")?;
//! client.place(NewOrder::limit(1, SymbolId(0), Side::Buy, 100, 10))?;
//! match client.recv()? {
//!     Delivery::Msg(msg) => println!("{msg}"),
//!     Delivery::Reconnected { addr, placed, resent } => {
//!         println!("now at {addr}: placed before {placed:?}, sent again {resent:?}")
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use rialto_core::{OrderId, Reason, UserId};
use rialto_wire::{ClientMsg, ErrorCode, NewOrder, OrderState, RequestKind, ServerMsg};

use crate::{Client, ClientError};

/// Orders a [`FailoverClient`] keeps in flight at most (sent, not yet answered).
pub const MAX_IN_FLIGHT: usize = 1 << 16;
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The pause after every node of the list refused, before the next round.
const ROUND_PAUSE: Duration = Duration::from_millis(50);

/// What [`FailoverClient::recv`] hands over.
#[derive(Clone, Debug, PartialEq)]
pub enum Delivery {
    /// A frame from the node the client is logged in at.
    Msg(ServerMsg),
    /// The connection dropped and the client logged in again at `addr`. Of the orders in
    /// flight, `placed` were placed before (their state now: `open` or `ended`): no Accepted
    /// for them will come. `resent` were unknown there and were sent again: an Accepted or a
    /// Rejected answers each, as for any order.
    Reconnected {
        addr: String,
        placed: Vec<(OrderId, OrderState)>,
        resent: Vec<OrderId>,
    },
}

/// A trader's connection to whichever node of a venue leads.
pub struct FailoverClient {
    addrs: Vec<String>,
    user: UserId,
    secret: Vec<u8>,
    read_timeout: Duration,
    reconnect_within: Duration,
    client: Client,
    /// The index in `addrs` of the node the client is logged in at.
    current: usize,
    /// Orders sent and not answered yet, with their terms (for a resend).
    in_flight: BTreeMap<OrderId, NewOrder>,
    next_request: u64,
    pending: VecDeque<Delivery>,
}

impl FailoverClient {
    /// Logs in as `user` at the first of `addrs` that accepts, trying the list for up to
    /// 30 s; reads then wait up to 10 s.
    pub fn connect(
        addrs: &[impl AsRef<str>],
        user: UserId,
        secret: &[u8],
    ) -> Result<FailoverClient, ClientError> {
        FailoverClient::connect_with(
            addrs,
            user,
            secret,
            Duration::from_secs(10),
            Duration::from_secs(30),
        )
    }

    /// [`Self::connect`] with the read timeout and how long finding a node that accepts may
    /// take (at start and after each drop).
    pub fn connect_with(
        addrs: &[impl AsRef<str>],
        user: UserId,
        secret: &[u8],
        read_timeout: Duration,
        reconnect_within: Duration,
    ) -> Result<FailoverClient, ClientError> {
        let addrs: Vec<String> = addrs.iter().map(|a| a.as_ref().to_owned()).collect();
        if addrs.is_empty() {
            return Err(ClientError::Unexpected("no node addresses".into()));
        }
        let (client, current) = log_in_somewhere(
            &addrs,
            addrs.len() - 1,
            user,
            secret,
            read_timeout,
            reconnect_within,
        )?;
        Ok(FailoverClient {
            addrs,
            user,
            secret: secret.to_vec(),
            read_timeout,
            reconnect_within,
            client,
            current,
            in_flight: BTreeMap::new(),
            next_request: 1,
            pending: VecDeque::new(),
        })
    }

    /// The address of the node the client is logged in at.
    pub fn addr(&self) -> &str {
        &self.addrs[self.current]
    }

    /// The ids of the orders sent and not answered yet.
    pub fn in_flight(&self) -> impl Iterator<Item = OrderId> + '_ {
        self.in_flight.keys().copied()
    }

    /// Sends an order and keeps it in flight until an Accepted or Rejected answers it (or a
    /// reconnection finds it placed). A connection lost while sending is recovered from at
    /// once: the next [`Self::recv`] reports it.
    pub fn place(&mut self, order: NewOrder) -> Result<(), ClientError> {
        if self.in_flight.contains_key(&order.order) {
            return Err(ClientError::Unexpected(format!(
                "order {} is in flight already",
                order.order
            )));
        }
        if self.in_flight.len() >= MAX_IN_FLIGHT {
            return Err(ClientError::Unexpected(format!(
                "{MAX_IN_FLIGHT} orders in flight: wait for their answers"
            )));
        }
        self.in_flight.insert(order.order, order);
        match self.client.place(order) {
            Ok(()) => Ok(()),
            Err(e) if is_connection_lost(&e) => self.fail_over(),
            Err(e) => Err(e),
        }
    }

    /// The next delivery: a frame, or the report of a reconnection after the connection
    /// dropped. A read that times out is an error ([`ClientError::is_timeout`]), as with
    /// [`Client::recv`].
    pub fn recv(&mut self) -> Result<Delivery, ClientError> {
        if let Some(delivery) = self.pending.pop_front() {
            return Ok(delivery);
        }
        match self.client.recv() {
            Ok(ServerMsg::Error {
                code: ErrorCode::ShuttingDown,
                ..
            }) => {
                self.fail_over()?;
                Ok(self
                    .pending
                    .pop_front()
                    .expect("a fail-over reports itself"))
            }
            Ok(msg) => {
                if let ServerMsg::Accepted {
                    order,
                    kind: RequestKind::Place,
                    ..
                }
                | ServerMsg::Rejected {
                    order,
                    kind: RequestKind::Place,
                    ..
                } = msg
                {
                    self.in_flight.remove(&order);
                }
                Ok(Delivery::Msg(msg))
            }
            Err(e) if is_connection_lost(&e) => {
                self.fail_over()?;
                Ok(self
                    .pending
                    .pop_front()
                    .expect("a fail-over reports itself"))
            }
            Err(e) => Err(e),
        }
    }

    /// Sends a query (a request id is any the caller likes) and waits for its reply, sending
    /// it again at the next node if the connection drops meanwhile (a query changes nothing).
    pub fn request(&mut self, msg: &ClientMsg) -> Result<ServerMsg, ClientError> {
        loop {
            match self.client.request(msg) {
                Err(e) if is_connection_lost(&e) => self.fail_over()?,
                other => return other,
            }
        }
    }

    /// What became of one of the user's orders (an OrderStatus query).
    pub fn order_status(&mut self, order: OrderId) -> Result<(OrderState, i64), ClientError> {
        let request = self.take_request_id();
        match self.request(&ClientMsg::OrderStatus { request, order })? {
            ServerMsg::OrderStatus {
                state, remaining, ..
            } => Ok((state, remaining)),
            other => Err(ClientError::Unexpected(format!(
                "{other} in answer to an order status"
            ))),
        }
    }

    fn take_request_id(&mut self) -> u64 {
        self.next_request += 1;
        self.next_request
    }

    /// Logs in at the next node that accepts and settles the orders in flight; queues the
    /// [`Delivery::Reconnected`] that reports it. A node that does not answer a status query
    /// within the read timeout (a paused leader) is passed over like one that closed the
    /// connection. Even when no node settles everything in time, the orders found placed so
    /// far are reported (after the error): an order leaves `in_flight` only with its report.
    fn fail_over(&mut self) -> Result<(), ClientError> {
        let deadline = Instant::now() + self.reconnect_within;
        let mut placed = Vec::new();
        let mut resent = Vec::new();
        let outcome = 'again: loop {
            let within = deadline.saturating_duration_since(Instant::now());
            let (client, current) = match log_in_somewhere(
                &self.addrs,
                self.current,
                self.user,
                &self.secret,
                self.read_timeout,
                within,
            ) {
                Ok(found) => found,
                Err(e) => break Err(e),
            };
            self.client = client;
            self.current = current;
            // After another drop, what was sent again may or may not have arrived: ask again.
            resent.clear();
            let unsettled: Vec<OrderId> = self.in_flight.keys().copied().collect();
            for order in unsettled {
                let request = self.take_request_id();
                let state = match self
                    .client
                    .request(&ClientMsg::OrderStatus { request, order })
                {
                    Ok(ServerMsg::OrderStatus { state, .. }) => state,
                    Ok(other) => {
                        break 'again Err(ClientError::Unexpected(format!(
                            "{other} in answer to an order status"
                        )));
                    }
                    Err(e) if is_connection_lost(&e) || e.is_timeout() => {
                        if Instant::now() >= deadline {
                            break 'again Err(e);
                        }
                        continue 'again;
                    }
                    Err(e) => break 'again Err(e),
                };
                if state == OrderState::Unknown {
                    let terms = self.in_flight[&order];
                    match self.client.place(terms) {
                        Ok(()) => resent.push(order),
                        Err(e) if is_connection_lost(&e) && Instant::now() < deadline => {
                            continue 'again;
                        }
                        Err(e) => break 'again Err(e),
                    }
                } else {
                    self.in_flight.remove(&order);
                    placed.push((order, state));
                }
            }
            break Ok(());
        };
        if outcome.is_ok() || !placed.is_empty() || !resent.is_empty() {
            self.pending.push_back(Delivery::Reconnected {
                addr: self.addrs[self.current].clone(),
                placed,
                resent,
            });
        }
        outcome
    }
}

/// Whether `msg` refuses an order as `duplicate_order_id`. For an order that was sent again
/// after a reconnection, that means its first send placed it after all (the node that
/// answered the status query had not applied it yet: a deposed leader that still answered).
pub fn is_duplicate(msg: &ServerMsg) -> bool {
    matches!(
        msg,
        ServerMsg::Rejected {
            reason: Reason::DuplicateOrderId,
            ..
        }
    )
}

/// An error after which this connection is of no more use: the node closed it or died, or
/// said it is shutting down (a leader that stops, or lost its lease, sends Error
/// `shutting_down` before it closes its sessions).
fn is_connection_lost(e: &ClientError) -> bool {
    match e {
        ClientError::Closed => true,
        ClientError::Io(_) => !e.is_timeout(),
        ClientError::Server { code, .. } => *code == ErrorCode::ShuttingDown,
        _ => false,
    }
}

/// Logs in at the first node after `after` (round the list) that accepts, for up to `within`.
fn log_in_somewhere(
    addrs: &[String],
    after: usize,
    user: UserId,
    secret: &[u8],
    read_timeout: Duration,
    within: Duration,
) -> Result<(Client, usize), ClientError> {
    let deadline = Instant::now() + within;
    let mut last_error = None;
    loop {
        for step in 1..=addrs.len() {
            let i = (after + step) % addrs.len();
            match log_in(&addrs[i], user, secret, read_timeout) {
                Ok(client) => return Ok((client, i)),
                // A wrong secret is wrong at every node; a node shutting down is passed over.
                Err(e @ ClientError::Server { .. }) if !is_connection_lost(&e) => return Err(e),
                Err(e) => last_error = Some(e),
            }
        }
        if Instant::now() >= deadline {
            let last = last_error.map_or_else(String::new, |e| format!(" (last: {e})"));
            return Err(ClientError::Unexpected(format!(
                "no node of {} accepted a login within {within:?}{last}",
                addrs.join(", ")
            )));
        }
        std::thread::sleep(ROUND_PAUSE);
    }
}

fn log_in(
    addr: &str,
    user: UserId,
    secret: &[u8],
    read_timeout: Duration,
) -> Result<Client, ClientError> {
    let mut last_error = ClientError::Unexpected(format!("{addr} resolves to no address"));
    for socket_addr in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&socket_addr, CONNECT_TIMEOUT) {
            Ok(stream) => {
                let mut client = Client::from_stream(stream)?;
                client.set_read_timeout(Some(read_timeout))?;
                client.login(user, secret)?;
                return Ok(client);
            }
            Err(e) => last_error = e.into(),
        }
    }
    Err(last_error)
}
