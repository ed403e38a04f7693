//! `FailoverClient` against scripted nodes on 127.0.0.1: the first address has no listener, the
//! second leads until it closes the connection with orders in flight, the third takes over and
//! answers the client's status queries. Every socket has a read timeout, so a bug fails the
//! test instead of hanging it.

use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use rialto_client::failover::{Delivery, FailoverClient};
use rialto_core::{Side, SymbolId};
use rialto_wire::{ClientMsg, ErrorCode, NewOrder, OrderState, RequestKind, ServerMsg};

mod common;

use common::{ScriptedConn, TIMEOUT};

/// A scripted node: a connection past its login.
struct Node(ScriptedConn);

impl Node {
    /// Accepts one connection and its login.
    fn accept(listener: &TcpListener) -> Node {
        let mut node = Node(ScriptedConn::accept(listener));
        match node.recv() {
            ClientMsg::Login { user: 1, .. } => {}
            other => panic!("expected user 1's login, got {other:?}"),
        }
        node.send(&ServerMsg::LoginAccepted {
            user: 1,
            last_seq: 10,
        });
        node
    }

    fn recv(&mut self) -> ClientMsg {
        self.0.recv()
    }

    fn send(&mut self, msg: &ServerMsg) {
        self.0.send(msg)
    }

    fn new_order(&mut self) -> NewOrder {
        match self.recv() {
            ClientMsg::NewOrder(order) => order,
            other => panic!("expected an order, got {other:?}"),
        }
    }
}

fn accepted(order: i64, seq: u64) -> ServerMsg {
    ServerMsg::Accepted {
        seq,
        ts_ns: 1,
        order,
        kind: RequestKind::Place,
    }
}

#[test]
fn the_client_moves_to_the_next_node_settles_what_was_in_flight_and_resends_the_unknown() {
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let old = TcpListener::bind("127.0.0.1:0").unwrap();
    let new = TcpListener::bind("127.0.0.1:0").unwrap();
    let addrs = [
        dead_addr,
        old.local_addr().unwrap().to_string(),
        new.local_addr().unwrap().to_string(),
    ];

    // The old leader acknowledges order 1, reads orders 2 and 3 and dies.
    let old_leader = std::thread::spawn(move || {
        let mut node = Node::accept(&old);
        assert_eq!(node.new_order().order, 1);
        node.send(&accepted(1, 11));
        assert_eq!(node.new_order().order, 2);
        assert_eq!(node.new_order().order, 3);
    });
    // The new leader has order 2 (the old one's log reached it) but not 3.
    let new_leader = std::thread::spawn(move || {
        let mut node = Node::accept(&new);
        for _ in 0..2 {
            match node.recv() {
                ClientMsg::OrderStatus { request, order } => {
                    let state = match order {
                        2 => OrderState::Open,
                        3 => OrderState::Unknown,
                        other => panic!("a status query of order {other}"),
                    };
                    let remaining = if state == OrderState::Open { 5 } else { 0 };
                    node.send(&ServerMsg::OrderStatus {
                        request,
                        seq: 12,
                        order,
                        state,
                        remaining,
                    });
                }
                other => panic!("expected a status query, got {other:?}"),
            }
        }
        let resent = node.new_order();
        assert_eq!((resent.order, resent.qty), (3, 7), "order 3 as first sent");
        node.send(&accepted(3, 13));
        // Then the client's own status query.
        match node.recv() {
            ClientMsg::OrderStatus { request, order: 9 } => node.send(&ServerMsg::OrderStatus {
                request,
                seq: 13,
                order: 9,
                state: OrderState::Unknown,
                remaining: 0,
            }),
            other => panic!("expected a status query of order 9, got {other:?}"),
        }
    });

    let mut client =
        FailoverClient::connect_with(&addrs, 1, b"secret", TIMEOUT, Duration::from_secs(10))
            .unwrap();
    assert_eq!(
        client.addr(),
        addrs[1],
        "the address without a listener is passed over"
    );
    for (id, qty) in [(1, 5), (2, 5), (3, 7)] {
        client
            .place(NewOrder::limit(id, SymbolId(0), Side::Buy, 100, qty))
            .unwrap();
    }
    assert!(
        client
            .place(NewOrder::limit(3, SymbolId(0), Side::Buy, 100, 1))
            .is_err()
    );
    assert_eq!(client.recv().unwrap(), Delivery::Msg(accepted(1, 11)));
    assert_eq!(client.in_flight().collect::<Vec<_>>(), [2, 3]);
    old_leader.join().unwrap();
    assert_eq!(
        client.recv().unwrap(),
        Delivery::Reconnected {
            addr: addrs[2].clone(),
            placed: vec![(2, OrderState::Open)],
            resent: vec![3],
        }
    );
    assert_eq!(client.in_flight().collect::<Vec<_>>(), [3]);
    assert_eq!(client.recv().unwrap(), Delivery::Msg(accepted(3, 13)));
    assert_eq!(client.in_flight().count(), 0);
    assert_eq!(client.order_status(9).unwrap(), (OrderState::Unknown, 0));
    new_leader.join().unwrap();
}

#[test]
fn a_node_that_says_it_is_shutting_down_is_left_for_the_next() {
    let old = TcpListener::bind("127.0.0.1:0").unwrap();
    let new = TcpListener::bind("127.0.0.1:0").unwrap();
    let addrs = [
        old.local_addr().unwrap().to_string(),
        new.local_addr().unwrap().to_string(),
    ];
    // The old leader reads order 1, says it is shutting down (as a leader that lost its lease
    // does) and keeps the connection open until the client has moved on.
    let (moved, wait_moved) = mpsc::channel::<()>();
    let old_leader = std::thread::spawn(move || {
        let mut node = Node::accept(&old);
        assert_eq!(node.new_order().order, 1);
        node.send(&ServerMsg::Error {
            code: ErrorCode::ShuttingDown,
            message: "the server is shutting down".into(),
        });
        let _ = wait_moved.recv_timeout(TIMEOUT);
    });
    let new_leader = std::thread::spawn(move || {
        let mut node = Node::accept(&new);
        match node.recv() {
            ClientMsg::OrderStatus { request, order: 1 } => node.send(&ServerMsg::OrderStatus {
                request,
                seq: 12,
                order: 1,
                state: OrderState::Open,
                remaining: 5,
            }),
            other => panic!("expected a status query of order 1, got {other:?}"),
        }
    });
    let mut client =
        FailoverClient::connect_with(&addrs, 1, b"secret", TIMEOUT, Duration::from_secs(10))
            .unwrap();
    client
        .place(NewOrder::limit(1, SymbolId(0), Side::Buy, 100, 5))
        .unwrap();
    assert_eq!(
        client.recv().unwrap(),
        Delivery::Reconnected {
            addr: addrs[1].clone(),
            placed: vec![(1, OrderState::Open)],
            resent: vec![],
        }
    );
    moved.send(()).unwrap();
    old_leader.join().unwrap();
    new_leader.join().unwrap();
}

#[test]
fn a_node_that_stops_answering_status_queries_is_left_for_the_next_and_nothing_settled_is_lost() {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let addrs: Vec<String> = (listeners.iter())
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    let mut listeners = listeners.into_iter();
    let (first, paused, last) = (
        listeners.next().unwrap(),
        listeners.next().unwrap(),
        listeners.next().unwrap(),
    );
    // The leader reads orders 1 and 2 and dies before answering either.
    let leader = std::thread::spawn(move || {
        let mut node = Node::accept(&first);
        assert_eq!(node.new_order().order, 1);
        assert_eq!(node.new_order().order, 2);
    });
    // The next node answers the status of order 1, then stops answering (a paused process):
    // it keeps the connection open until the client has moved on.
    let (moved, wait_moved) = mpsc::channel::<()>();
    let silent = std::thread::spawn(move || {
        let mut node = Node::accept(&paused);
        match node.recv() {
            ClientMsg::OrderStatus { request, order: 1 } => node.send(&ServerMsg::OrderStatus {
                request,
                seq: 12,
                order: 1,
                state: OrderState::Open,
                remaining: 5,
            }),
            other => panic!("expected a status query of order 1, got {other:?}"),
        }
        let _ = wait_moved.recv_timeout(TIMEOUT);
    });
    // The third node answers for order 2 only: order 1 was settled already.
    let answering = std::thread::spawn(move || {
        let mut node = Node::accept(&last);
        match node.recv() {
            ClientMsg::OrderStatus { request, order: 2 } => node.send(&ServerMsg::OrderStatus {
                request,
                seq: 13,
                order: 2,
                state: OrderState::Ended,
                remaining: 0,
            }),
            other => panic!("expected a status query of order 2, got {other:?}"),
        }
    });
    let mut client = FailoverClient::connect_with(
        &addrs,
        1,
        b"secret",
        Duration::from_millis(300),
        Duration::from_secs(10),
    )
    .unwrap();
    for order in [1, 2] {
        client
            .place(NewOrder::limit(order, SymbolId(0), Side::Buy, 100, 5))
            .unwrap();
    }
    leader.join().unwrap();
    assert_eq!(
        client.recv().unwrap(),
        Delivery::Reconnected {
            addr: addrs[2].clone(),
            placed: vec![(1, OrderState::Open), (2, OrderState::Ended)],
            resent: vec![],
        }
    );
    assert_eq!(client.in_flight().count(), 0);
    moved.send(()).unwrap();
    silent.join().unwrap();
    answering.join().unwrap();
}
